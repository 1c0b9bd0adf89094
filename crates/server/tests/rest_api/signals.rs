//! Owner corrections with criteria (O14, R6) and agent-host signals (O12, O13) over the REST
//! API: what the owner and the assignees may post, read back, and every refusal a clear 4xx
//! that stores and changes nothing (the Room's revision and ledger stay as they were).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::hosted::objective_with_sams_gather;
use super::support::App;
use super::{UNKNOWN, task};

const EVENTS: &str = "/v1/rooms/local/events";

/// The one objective's id and path.
async fn the_objective(app: &App) -> (String, String) {
    let objectives = app.get("olive", "/v1/rooms/local/objectives").await;
    let id = objectives["items"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/rooms/local/objectives/{id}");
    (id, path)
}

/// A refused post: what it is, who posts it where, with which body; the status, error code
/// and rule (when one is named) it must get.
type Case<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Value,
    StatusCode,
    &'a str,
    Option<&'a str>,
);

/// Each case, posted as `who`, is refused with `status`, `code` and (when given) `rule`; the
/// Room's revision and ledger are unchanged after all of them.
async fn refused_changing_nothing(app: &App, cases: &[Case<'_>]) {
    let before = app.snapshot().await;
    for (case, who, path, body, status, code, rule) in cases {
        let answer = app.as_(who, Method::POST, path, &body.to_string()).await;
        assert_eq!(answer.status, *status, "{case}: {answer:?}");
        let error = answer.assert_error(*status, code);
        if let Some(rule) = rule {
            assert_eq!(error["rule"], *rule, "{case}: {error}");
        }
        assert!(
            error.get("revision").is_none(),
            "{case}: nothing was logged: {error}"
        );
        assert!(!error["message"].as_str().unwrap().is_empty(), "{case}");
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused post changed the room"
    );
}

/// O14 and R6: the owner corrects a running objective's text and criteria over REST; the
/// criteria are frozen anew, the repair counters reset, and the correction history reads
/// back (for every role that may read objectives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o14_r6_the_owner_corrects_text_and_criteria_and_reads_the_history() {
    let (app, _gather) = objective_with_sams_gather().await;
    let (id, path) = the_objective(&app).await;
    let before = app.get("olive", &path).await;
    let empty = app.get("olive", &format!("{path}/corrections")).await;
    assert_eq!(empty["items"], json!([]), "{empty}");
    let criteria = json!([
        {"id": "eu-only", "text": "every vendor named is in the EU"},
        {"id": "cites-sources", "text": "every claim cites a source"},
    ]);
    let answer = app
        .post(
            "olive",
            EVENTS,
            &json!({"kind": "owner_correction", "objective": id, "text": "EU vendors only", "criteria": criteria})
                .to_string(),
        )
        .await;
    assert_eq!(answer["accepted"], true, "{answer}");
    assert!(
        answer["log"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["rule"] == "R6"),
        "{answer}"
    );
    let after = app.get("olive", &path).await;
    assert_eq!(after["criteria"], criteria, "{after}");
    assert_eq!(
        after["revision"].as_u64().unwrap(),
        before["revision"].as_u64().unwrap() + 1
    );
    assert_eq!(after["counters"]["replans_without_progress"], 0);
    assert_eq!(after["counters"]["failed_report_versions"], 0);
    for who in ["olive", "oscar", "rita", "sam", "hank"] {
        let history = app.get(who, &format!("{path}/corrections")).await;
        let items = history["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{who}: {history}");
        assert_eq!(items[0]["author"], "olive");
        assert_eq!(items[0]["text"], "EU vendors only");
        assert_eq!(items[0]["criteria"], criteria);
        assert_eq!(items[0]["event"], answer["event"]);
        assert_eq!(history["criteria"], criteria);
    }
    // A correction without criteria keeps them.
    let kept = app
        .post(
            "olive",
            EVENTS,
            &json!({"kind": "owner_correction", "objective": id, "text": "and name the source of each price"})
                .to_string(),
        )
        .await;
    assert_eq!(kept["accepted"], true, "{kept}");
    let history = app.get("olive", &format!("{path}/corrections")).await;
    assert_eq!(history["items"][1]["criteria"], Value::Null, "{history}");
    assert_eq!(history["criteria"], criteria);
    // An unknown objective's history is not found.
    app.as_(
        "olive",
        Method::GET,
        &format!("/v1/rooms/local/objectives/{UNKNOWN}/corrections"),
        "",
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "not_found");
}

/// O14: every bad correction is a clear 4xx naming its rule, stored nowhere; a canceled
/// objective is not reopened, and the refusal says to post a new message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o14_bad_corrections_get_a_clear_4xx_and_change_nothing() {
    let (app, _gather) = objective_with_sams_gather().await;
    let (id, path) = the_objective(&app).await;
    let correction = |text: &str, criteria: Value| {
        let mut body = json!({"kind": "owner_correction", "objective": id, "text": text});
        if !criteria.is_null() {
            body["criteria"] = criteria;
        }
        body
    };
    let unprocessable = StatusCode::UNPROCESSABLE_ENTITY;
    refused_changing_nothing(
        &app,
        &[
            (
                "blank text",
                "olive",
                EVENTS,
                correction(" \n ", Value::Null),
                unprocessable,
                "invalid_body",
                None,
            ),
            (
                "unknown objective",
                "olive",
                EVENTS,
                json!({"kind": "owner_correction", "objective": UNKNOWN, "text": "x"}),
                StatusCode::NOT_FOUND,
                "not_found",
                Some("O14"),
            ),
            (
                "no criterion",
                "olive",
                EVENTS,
                correction("x", json!([])),
                unprocessable,
                "invalid_body",
                Some("O14"),
            ),
            (
                "a criterion twice",
                "olive",
                EVENTS,
                correction(
                    "x",
                    json!([{"id": "a", "text": "one"}, {"id": "a", "text": "two"}]),
                ),
                unprocessable,
                "invalid_body",
                Some("O14"),
            ),
            (
                "a blank criterion",
                "olive",
                EVENTS,
                correction("x", json!([{"id": "a", "text": "  "}])),
                unprocessable,
                "invalid_body",
                Some("O14"),
            ),
            (
                "not a criterion id",
                "olive",
                EVENTS,
                correction("x", json!([{"id": "Not An Id", "text": "one"}])),
                unprocessable,
                "invalid_body",
                None,
            ),
            (
                "an unknown field in a criterion",
                "olive",
                EVENTS,
                correction("x", json!([{"id": "a", "text": "one", "weight": 2}])),
                unprocessable,
                "invalid_body",
                None,
            ),
            (
                "the operator",
                "oscar",
                EVENTS,
                correction("x", Value::Null),
                StatusCode::FORBIDDEN,
                "refused",
                Some("O14"),
            ),
            (
                "a specialist",
                "sam",
                EVENTS,
                correction("x", Value::Null),
                StatusCode::FORBIDDEN,
                "refused",
                Some("O14"),
            ),
        ],
    )
    .await;
    assert_eq!(
        app.get("olive", &format!("{path}/corrections")).await["items"],
        json!([])
    );
    // Canceled: terminal, never reopened by a correction.
    app.post(
        "olive",
        &format!("{path}/control"),
        r#"{"action":"cancel"}"#,
    )
    .await;
    let before = app.get("olive", &path).await;
    assert_eq!(before["status"], "canceled");
    refused_changing_nothing(
        &app,
        &[(
            "a canceled objective",
            "olive",
            EVENTS,
            correction("reopen it", json!([{"id": "a", "text": "one"}])),
            StatusCode::CONFLICT,
            "rule_refused",
            Some("O14"),
        )],
    )
    .await;
    let answer = app
        .as_(
            "olive",
            Method::POST,
            EVENTS,
            &correction("reopen it", Value::Null).to_string(),
        )
        .await;
    let error = answer.assert_error(StatusCode::CONFLICT, "rule_refused");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("post a new owner message"),
        "{error}"
    );
    assert_eq!(app.get("olive", &path).await, before);
}

/// O12: the assignee of a running task says it waits, over its assignment and as an event;
/// the task shows waiting, and its result still completes it and the next task goes ahead.
/// Another's task, an agent host, an unknown task or objective, a task that is not running
/// and a blank reason are refused with a clear 4xx and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o12_the_assignee_acknowledges_a_wait_and_nobody_else_can() {
    let (app, gather) = objective_with_sams_gather().await;
    let (id, path) = the_objective(&app).await;
    let op = gather["operation"].as_str().unwrap().to_owned();
    let detail = app.get("olive", &path).await;
    let gather_id = task(&detail, "gather")["identity"].clone();
    let write_id = task(&detail, "write")["identity"].clone();
    let ack = |task: &Value, reason: &str| json!({"kind": "wait_ack", "objective": id, "task": task, "reason": reason});
    let wait = format!("/v1/rooms/local/assignments/{op}/wait");
    let unknown_wait = format!("/v1/rooms/local/assignments/{UNKNOWN}/wait");
    let forbidden = StatusCode::FORBIDDEN;
    refused_changing_nothing(
        &app,
        &[
            (
                "another specialist",
                "sue",
                EVENTS,
                ack(&gather_id, "x"),
                forbidden,
                "refused",
                Some("T3"),
            ),
            (
                "an agent host",
                "hank",
                EVENTS,
                ack(&gather_id, "x"),
                forbidden,
                "refused",
                Some("T3"),
            ),
            (
                "the reviewer",
                "rita",
                EVENTS,
                ack(&gather_id, "x"),
                forbidden,
                "refused",
                Some("T3"),
            ),
            (
                "the owner",
                "olive",
                EVENTS,
                ack(&gather_id, "x"),
                forbidden,
                "refused",
                Some("T3"),
            ),
            (
                "an unknown task",
                "sam",
                EVENTS,
                ack(&json!("nope/gather"), "x"),
                StatusCode::NOT_FOUND,
                "not_found",
                Some("O12"),
            ),
            (
                "an unknown objective",
                "sam",
                EVENTS,
                json!({"kind": "wait_ack", "objective": UNKNOWN, "task": gather_id, "reason": "x"}),
                StatusCode::NOT_FOUND,
                "not_found",
                Some("O12"),
            ),
            (
                "a task not running",
                "sue",
                EVENTS,
                ack(&write_id, "x"),
                StatusCode::CONFLICT,
                "rule_refused",
                Some("O12"),
            ),
            (
                "a blank reason",
                "sam",
                EVENTS,
                ack(&gather_id, "  "),
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                None,
            ),
            (
                "another's assignment",
                "sue",
                &wait,
                json!({"reason": "x"}),
                forbidden,
                "refused",
                None,
            ),
            (
                "no such assignment",
                "sam",
                &unknown_wait,
                json!({"reason": "x"}),
                StatusCode::NOT_FOUND,
                "not_found",
                None,
            ),
            (
                "a blank reason on the assignment",
                "sam",
                &wait,
                json!({"reason": ""}),
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                None,
            ),
            (
                "an unknown field",
                "sam",
                &wait,
                json!({"reason": "x", "task": "y"}),
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                None,
            ),
        ],
    )
    .await;
    let answer = app
        .as_(
            "sam",
            Method::POST,
            &wait,
            &json!({"reason": "waiting for the publisher's licence"}).to_string(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
    let answer = answer.json();
    assert_eq!(answer["accepted"], true, "{answer}");
    assert_eq!(answer["log"][0]["rule"], "O12", "{answer}");
    let detail = app.get("olive", &path).await;
    let waiting = task(&detail, "gather");
    assert_eq!(waiting["state"]["state"], "waiting_outside", "{waiting}");
    assert_eq!(
        waiting["state"]["reason"],
        "waiting for the publisher's licence"
    );
    assert_eq!(waiting["column"], "in_progress");
    // Again as an event, by the assignee: still waiting, one more decision.
    let again = app
        .post("sam", EVENTS, &ack(&gather_id, "still waiting").to_string())
        .await;
    assert_eq!(again["accepted"], true, "{again}");
    // The result of the waiting task completes it; the report task goes ahead (O12).
    let body = json!({
        "outcome": "contribution",
        "artifacts": [{"name": "notes", "content": "Leases fence stale writers."}],
        "sources": [{
            "kind": "external",
            "url": "https://example.org/runtime-benchmarks-2026",
            "digest": "sha256:9689f6287a68c8c6a28acb9452b06fa6dec179938470ef1e02c7a6a50fd6e003",
        }],
        "outputs": {"findings": ["Leases fence stale writers."]},
        "usage_micros": 100,
    });
    let submitted = app
        .as_(
            "sam",
            Method::POST,
            &format!("/v1/rooms/local/assignments/{op}/result"),
            &body.to_string(),
        )
        .await;
    assert_eq!(submitted.status, StatusCode::ACCEPTED, "{submitted:?}");
    super::hosted::assignment(&app, "sue", "write").await;
}

/// O13 and T3: an assignee of the objective's tasks records receipts, over its assignment or
/// as an event; a receipt for a canceled objective is consumed without a model call (no
/// reservation is made). Anyone else, an unknown objective and a blank note are refused and
/// change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o13_assignees_record_receipts_and_a_terminal_objective_consumes_them_without_a_call() {
    let (app, gather) = objective_with_sams_gather().await;
    let (id, path) = the_objective(&app).await;
    let op = gather["operation"].as_str().unwrap().to_owned();
    let receipt = |note: &str| json!({"kind": "internal_receipt", "objective": id, "note": note});
    let receipt_path = format!("/v1/rooms/local/assignments/{op}/receipt");
    refused_changing_nothing(
        &app,
        &[
            (
                "the reviewer",
                "rita",
                EVENTS,
                receipt("x"),
                StatusCode::FORBIDDEN,
                "refused",
                Some("T3"),
            ),
            (
                "an agent host",
                "hank",
                EVENTS,
                receipt("x"),
                StatusCode::FORBIDDEN,
                "refused",
                Some("T3"),
            ),
            (
                "the owner",
                "olive",
                EVENTS,
                receipt("x"),
                StatusCode::FORBIDDEN,
                "refused",
                Some("T3"),
            ),
            (
                "an unknown objective",
                "sam",
                EVENTS,
                json!({"kind": "internal_receipt", "objective": UNKNOWN, "note": "x"}),
                StatusCode::NOT_FOUND,
                "not_found",
                Some("O9"),
            ),
            (
                "a blank note",
                "sam",
                EVENTS,
                receipt(" "),
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                None,
            ),
            (
                "another's assignment",
                "sue",
                &receipt_path,
                json!({"note": "x"}),
                StatusCode::FORBIDDEN,
                "refused",
                None,
            ),
            (
                "a blank note on the assignment",
                "sam",
                &receipt_path,
                json!({"note": "\t"}),
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                None,
            ),
        ],
    )
    .await;
    app.post(
        "olive",
        &format!("{path}/control"),
        r#"{"action":"cancel"}"#,
    )
    .await;
    let (_, budget) = app.snapshot().await;
    let reserved = |budget: &Value| {
        budget["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["entry"] == "reserved")
            .count()
    };
    let calls_before = reserved(&budget);
    // sue writes the report: an assignee of the objective too.
    let consumed = app
        .post(
            "sue",
            EVENTS,
            &receipt("the publisher confirmed the licence").to_string(),
        )
        .await;
    assert_eq!(consumed["accepted"], true, "{consumed}");
    assert_eq!(consumed["log"][0]["rule"], "O13", "{consumed}");
    assert!(
        consumed["log"][0]["message"]
            .as_str()
            .unwrap()
            .contains("without a reasoner call"),
        "{consumed}"
    );
    let (_, budget) = app.snapshot().await;
    assert_eq!(
        reserved(&budget),
        calls_before,
        "no call was reserved: {budget}"
    );
    assert_eq!(app.get("olive", &path).await["status"], "canceled");
}

/// T1 with O14: a correction retried under its Idempotency-Key after the objective ended is
/// answered as the correction it was (`already_done`), not refused as a correction of a
/// terminal objective: the client is never told no about what was done (and so never posts
/// it again under a new key). The Room is not changed by the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_o14_a_retried_correction_is_answered_as_done_after_its_objective_ended() {
    let (app, _gather) = objective_with_sams_gather().await;
    let (id, path) = the_objective(&app).await;
    let auth = format!("Bearer {}", app.token("olive"));
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("idempotency-key", "correction-1"),
    ];
    let body =
        json!({"kind": "owner_correction", "objective": id, "text": "EU vendors only"}).to_string();
    let first = app.call(Method::POST, EVENTS, &headers, body.clone()).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{first:?}");
    assert_eq!(first.json()["accepted"], true, "{first:?}");
    app.post(
        "olive",
        &format!("{path}/control"),
        r#"{"action":"cancel"}"#,
    )
    .await;
    app.settle().await;
    let before = app.snapshot().await;
    let retried = app.call(Method::POST, EVENTS, &headers, body).await;
    assert_eq!(retried.status, StatusCode::ACCEPTED, "{retried:?}");
    assert_eq!(
        retried.json()["event"],
        first.json()["event"],
        "{retried:?}"
    );
    assert_eq!(retried.json()["already_done"], true, "{retried:?}");
    assert_eq!(app.snapshot().await, before, "the retry changed the room");
    // A new correction of the canceled objective is refused, saying to post a new message.
    let refused = app
        .as_(
            "olive",
            Method::POST,
            EVENTS,
            &json!({"kind": "owner_correction", "objective": id, "text": "and in 2026"})
                .to_string(),
        )
        .await;
    let error = refused.assert_error(StatusCode::CONFLICT, "rule_refused");
    assert_eq!(error["rule"], "O14", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("post a new owner message"),
        "{error}"
    );
    let history = app.get("olive", &format!("{path}/corrections")).await;
    assert_eq!(history["items"].as_array().unwrap().len(), 1, "{history}");
}
