//! The test model's injected faults, as a separate process: `--fault [ROLE:]N=FAULT` at start
//! and `POST /_faults` at run time; each status with its OpenAI-style body (429 with
//! `retry-after`), a reset in mid-response, usage of zero or none; the journal line of each
//! request, written before it is answered; bad specs refused with what is wrong.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the support module is test \
              code too, and a failed unwrap or panic in it is a failed test"
)]

mod support;

use std::process::Command;

use serde_json::{Value, json};
use support::{REASONER, REVIEWER, SPECIALIST, TestModel, chat_request};

/// A reviewer request without criteria: the smallest valid chat completion.
fn reviewer() -> String {
    chat_request(REVIEWER, "{\"criteria\":[]}").to_string()
}

/// POSTs `body` with `Idempotency-Key: key`: the status, the `retry-after` header and the body
/// read whole (an error when it broke off).
async fn send(
    model: &TestModel,
    key: &str,
    body: String,
) -> (u16, Option<String>, Result<Value, String>) {
    let response = model
        .client()
        .post(format!("{}/v1/chat/completions", model.base))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = match response.bytes().await {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).unwrap()),
        Err(err) => Err(format!("{err:?}")),
    };
    (status, retry_after, body)
}

async fn arm(model: &TestModel, body: &Value) -> (u16, Value) {
    let response = model
        .client()
        .post(format!("{}/_faults", model.base))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn a_fault_replaces_the_nth_answer_of_its_role_or_of_all_and_is_journaled() {
    let model = TestModel::spawn_with(&[
        "--fault",
        "reviewer:2=503",
        "--fault",
        "1=429",
        "--fault",
        "4=408",
    ]);
    // 1: the first request of all gets a 429 that asks for a retry after one second.
    let (status, retry_after, body) = send(&model, "k1", reviewer()).await;
    assert_eq!((status, retry_after.as_deref()), (429, Some("1")));
    let body = body.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("injected by agentroom-testmodel --fault"),
        "{body}"
    );
    // 2: the second reviewer request.
    let (status, retry_after, body) = send(&model, "k2", reviewer()).await;
    assert_eq!((status, retry_after), (503, None));
    assert_eq!(body.unwrap()["error"]["code"], "service_unavailable");
    // 3: answered, numbered as the first answer.
    let (status, _, body) = send(&model, "k3", reviewer()).await;
    assert_eq!(status, 200);
    assert_eq!(body.unwrap()["id"], "tm-1");
    // 4: the fourth of all, whatever its role.
    let specialist = chat_request(SPECIALIST, "{\"task\":{}}").to_string();
    let (status, _, body) = send(&model, "k4", specialist).await;
    assert_eq!(status, 408);
    assert_eq!(body.unwrap()["error"]["code"], "timeout");
    // 5: every fault fired once; a request without a role is counted and journaled too.
    let (status, _, _) = send(&model, "k5", reviewer()).await;
    assert_eq!(status, 200);
    let (status, _, _) = send(&model, "k6", "not json".to_owned()).await;
    assert_eq!(status, 400);

    let line = |n: u64, role: &str, key: &str, model: Value, fault: Value, status: u16| {
        json!({"n": n, "role": role, "idempotency_key": key, "model": model,
               "fault": fault, "status": status})
    };
    assert_eq!(
        model.journaled(),
        [
            line(1, "reviewer", "k1", "test-model".into(), "429".into(), 429),
            line(2, "reviewer", "k2", "test-model".into(), "503".into(), 503),
            line(3, "reviewer", "k3", "test-model".into(), Value::Null, 200),
            line(
                4,
                "specialist",
                "k4",
                "test-model".into(),
                "408".into(),
                408
            ),
            line(5, "reviewer", "k5", "test-model".into(), Value::Null, 200),
            line(6, "unknown", "k6", Value::Null, Value::Null, 400),
        ]
    );
    // --record is unchanged: every JSON body, faulted or not.
    assert_eq!(model.recorded().len(), 5);
}

#[tokio::test]
async fn every_error_status_has_its_openai_style_body() {
    let model = TestModel::spawn_with(&[
        "--fault", "1=408", "--fault", "2=429", "--fault", "3=500", "--fault", "4=502", "--fault",
        "5=503", "--fault", "6=504",
    ]);
    let mut seen = Vec::new();
    for n in 1..=6 {
        let (status, _, body) = send(&model, &format!("k{n}"), reviewer()).await;
        let body = body.unwrap();
        seen.push((
            status,
            body["error"]["type"].as_str().unwrap().to_owned(),
            body["error"]["code"].as_str().unwrap().to_owned(),
        ));
    }
    let expected = [
        (408, "server_error", "timeout"),
        (429, "rate_limit_error", "rate_limit_exceeded"),
        (500, "server_error", "server_error"),
        (502, "server_error", "bad_gateway"),
        (503, "server_error", "service_unavailable"),
        (504, "server_error", "gateway_timeout"),
    ]
    .map(|(s, t, c)| (s, t.to_owned(), c.to_owned()));
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_reset_sends_200_and_part_of_the_body_then_drops_the_connection() {
    let model = TestModel::spawn_with(&["--fault", "specialist:1=reset"]);
    let mut response = model
        .client()
        .post(format!("{}/v1/chat/completions", model.base))
        .header("content-type", "application/json")
        .header("idempotency-key", "op-1")
        .body(chat_request(REVIEWER.replace("reviewer", "x").as_str(), "{}").to_string())
        .send()
        .await
        .unwrap();
    // Not the specialist: a refused request, answered whole.
    assert_eq!(response.status().as_u16(), 400);
    let _ = response.bytes().await.unwrap();

    response = model
        .client()
        .post(format!("{}/v1/chat/completions", model.base))
        .header("content-type", "application/json")
        .header("idempotency-key", "op-2")
        .body(chat_request(SPECIALIST, "{\"task\":{}}").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut received = Vec::new();
    let broke = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => panic!(
                "the body ended whole: {}",
                String::from_utf8_lossy(&received)
            ),
            Err(err) => break err,
        }
    };
    assert!(broke.is_body() || broke.is_decode(), "{broke:?}");
    let part = String::from_utf8(received).unwrap();
    assert!(part.starts_with('{') && part.len() > 10, "{part}");
    assert!(
        serde_json::from_str::<Value>(&part).is_err(),
        "only part: {part}"
    );

    // The journal has it, with the 200 that was sent; the next request is answered whole.
    let (status, _, body) = send(&model, "op-3", chat_request(SPECIALIST, "{}").to_string()).await;
    assert_eq!(status, 200);
    assert!(body.is_ok());
    let journal = model.journaled();
    assert_eq!(journal[1]["fault"], "reset");
    assert_eq!(journal[1]["status"], 200);
    assert_eq!(journal[1]["idempotency_key"], "op-2");
    assert_eq!(journal[2]["fault"], Value::Null);
}

#[tokio::test]
async fn zero_usage_and_no_usage_change_only_the_usage_of_the_answer() {
    let model = TestModel::spawn_with(&["--fault", "1=zero-usage", "--fault", "2=no-usage"]);
    let mut answers = Vec::new();
    for key in ["a", "b", "c"] {
        let (status, _, body) = send(&model, key, reviewer()).await;
        assert_eq!(status, 200);
        answers.push(body.unwrap());
    }
    assert_eq!(
        answers[0]["usage"],
        json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    );
    assert!(answers[1].get("usage").is_none(), "{}", answers[1]);
    assert!(answers[2]["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    for answer in &answers {
        assert_eq!(
            answer["choices"][0]["message"]["content"],
            "{\"verdicts\":[]}"
        );
    }
    let faults: Vec<Value> = model
        .journaled()
        .iter()
        .map(|l| l["fault"].clone())
        .collect();
    assert_eq!(
        faults,
        [json!("zero-usage"), json!("no-usage"), Value::Null]
    );
}

#[tokio::test]
async fn faults_armed_at_run_time_count_from_then_and_bad_ones_arm_nothing() {
    let model = TestModel::spawn_with(&["--fault", "reasoner:3=500"]);
    for key in ["a", "b"] {
        assert_eq!(send(&model, key, reviewer()).await.0, 200);
    }
    // The second reviewer request has passed: `reviewer:1` is the next one.
    let (status, answer) = arm(&model, &json!({"faults": ["reviewer:1=503", "2=504"]})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"armed": ["reviewer:1=503", "2=504"],
               "pending": ["reasoner:3=500", "reviewer:1=503", "2=504"]})
    );
    // Bad specs are refused with what is wrong, and none of the batch is armed.
    for (body, message) in [
        (
            json!({"faults": ["specialist:1=503", "writer:1=503"]}),
            "fault `writer:1=503`: unknown role `writer` (reasoner, specialist or reviewer)",
        ),
        (
            json!({"faults": ["reviewer:0=503"]}),
            "fault `reviewer:0=503`: N must be a request number from 1 (the first request), not `0`",
        ),
        (
            json!({"faults": ["1=418"]}),
            "fault `1=418`: unknown fault `418` (408, 429, 500, 502, 503, 504, reset, \
             zero-usage or no-usage)",
        ),
        (
            json!({"fault": ["1=503"]}),
            "the body must be {\"faults\": [\"[ROLE:]N=FAULT\", ...]}",
        ),
        (
            json!({"faults": [1]}),
            "the body must be {\"faults\": [\"[ROLE:]N=FAULT\", ...]}",
        ),
    ] {
        let (status, answer) = arm(&model, &body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["message"], message, "{body}");
        assert_eq!(answer["error"]["type"], "invalid_request_error");
    }
    assert_eq!(send(&model, "c", reviewer()).await.0, 503);
    assert_eq!(send(&model, "d", reviewer()).await.0, 504);
    let reasoner = chat_request(REASONER, "{}").to_string();
    assert_eq!(send(&model, "e", reasoner.clone()).await.0, 200);
    assert_eq!(send(&model, "f", reasoner.clone()).await.0, 200);
    assert_eq!(send(&model, "g", reasoner).await.0, 500);
    assert_eq!(send(&model, "h", reviewer()).await.0, 200);
}

#[test]
fn a_bad_fault_stops_the_start_with_what_is_wrong() {
    for (spec, message) in [
        ("writer:1=503", "unknown role `writer`"),
        ("specialist:0=503", "N must be a request number from 1"),
        ("1=418", "unknown fault `418`"),
        ("1", "a fault is [ROLE:]N=FAULT"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_agentroom-testmodel"))
            .args(["--listen", "127.0.0.1:0", "--fault", spec])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{spec}");
        assert!(out.stdout.is_empty(), "{spec}: it never listened");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains(&format!("fault `{spec}`: {message}")),
            "{spec}: {stderr}"
        );
    }
}
