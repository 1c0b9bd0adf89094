//! The Room's memory over REST (issue 18 part 3, M1): the owner or an operator adds an entry
//! with its provenance, corrects it (its history kept) and retracts it (kept, with who, when
//! and why); every member with `objective.read` lists it; every bad request is a clear 4xx,
//! and what the domain refuses by M1 is a 409 naming the rule.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{App, spawn_app};

const MEMORY: &str = "/v1/rooms/local/memory";
const DIGEST: &str = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";

async fn revision(app: &App) -> Value {
    app.get("oscar", "/v1/rooms/local").await["revision"].clone()
}

async fn listed(app: &App, who: &str) -> Vec<Value> {
    app.get(who, &format!("{MEMORY}?limit=200")).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn external(text: &str) -> String {
    json!({"text": text, "provenance": {"from": "external", "url": "https://example.org/paper", "digest": DIGEST}})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m1_the_owner_adds_corrects_and_retracts_an_entry_and_its_history_is_listed() {
    let app = spawn_app().await;
    let added = app
        .post("olive", MEMORY, &external("The deadline is May"))
        .await;
    assert_eq!(added["log"][0]["rule"], "M1", "{added}");
    assert_eq!(added["log"][0]["verdict"], "accepted", "{added}");
    let items = listed(&app, "sam").await;
    assert_eq!(items.len(), 1, "{items:?}");
    let entry = &items[0];
    let id = entry["id"].as_str().unwrap().to_owned();
    assert_eq!(entry["text"], "The deadline is May");
    assert_eq!(entry["added_by"], "olive");
    assert_eq!(
        entry["provenance"],
        json!({"from": "external", "url": "https://example.org/paper", "digest": DIGEST})
    );
    assert!(entry.get("retracted").is_none(), "{entry}");

    let corrected = app
        .post(
            "oscar",
            &format!("{MEMORY}/{id}/correct"),
            &json!({"text": "The deadline is June"}).to_string(),
        )
        .await;
    assert_eq!(corrected["log"][0]["verdict"], "accepted", "{corrected}");
    let entry = listed(&app, "rita").await[0].clone();
    assert_eq!(entry["text"], "The deadline is June");
    let versions: Vec<(&str, &str)> = entry["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["text"].as_str().unwrap(), v["by"].as_str().unwrap()))
        .collect();
    assert_eq!(
        versions,
        [
            ("The deadline is May", "olive"),
            ("The deadline is June", "oscar")
        ]
    );

    let retracted = app
        .post(
            "olive",
            &format!("{MEMORY}/{id}/retract"),
            &json!({"why": "wrong project"}).to_string(),
        )
        .await;
    assert_eq!(retracted["log"][0]["verdict"], "accepted", "{retracted}");
    let entry = listed(&app, "olive").await[0].clone();
    assert_eq!(entry["retracted"]["by"], "olive", "{entry}");
    assert_eq!(entry["retracted"]["why"], "wrong project", "{entry}");
    assert_eq!(
        entry["versions"].as_array().unwrap().len(),
        2,
        "kept: {entry}"
    );

    // A retracted entry is not corrected: the domain refuses it by M1 (409).
    let refused = app
        .as_(
            "olive",
            Method::POST,
            &format!("{MEMORY}/{id}/correct"),
            &json!({"text": "The deadline is July"}).to_string(),
        )
        .await;
    let error = refused.assert_error(StatusCode::CONFLICT, "rule_refused");
    assert!(
        error["message"].as_str().unwrap().contains("retracted"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m1_a_retry_with_the_same_idempotency_key_adds_one_entry() {
    let app = spawn_app().await;
    let auth = format!("Bearer {}", app.token("olive"));
    for _ in 0..2 {
        let answer = app
            .call(
                Method::POST,
                MEMORY,
                &[
                    ("authorization", &auth),
                    ("content-type", "application/json"),
                    ("idempotency-key", "remember-once"),
                ],
                external("once"),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    }
    assert_eq!(listed(&app, "olive").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m1_every_bad_memory_request_is_a_clear_4xx_and_changes_nothing() {
    let app = spawn_app().await;
    app.post("olive", MEMORY, &external("kept")).await;
    let id = listed(&app, "olive").await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let unknown = "00000000-0000-4000-8000-00000000000e";
    let before = revision(&app).await;
    let cases: Vec<(&str, String, String, StatusCode, &str, &str)> = vec![
        (
            "olive",
            MEMORY.to_owned(),
            external("  "),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "blank",
        ),
        (
            "olive",
            MEMORY.to_owned(),
            external(&"x".repeat(1001)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "at most 1000",
        ),
        (
            "olive",
            MEMORY.to_owned(),
            json!({"text": "x", "provenance": {"from": "external", "url": " ", "digest": DIGEST}})
                .to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "address",
        ),
        (
            "olive",
            MEMORY.to_owned(),
            json!({"text": "x", "provenance": {"from": "external", "url": "u", "digest": "md5:1"}})
                .to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "digest",
        ),
        (
            "olive",
            MEMORY.to_owned(),
            json!({"text": "x"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "provenance",
        ),
        (
            "olive",
            MEMORY.to_owned(),
            r#"{"text": "x""#.to_owned(),
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "JSON",
        ),
        (
            "olive",
            format!("{MEMORY}/{id}/correct"),
            json!({"text": "x", "extra": 1}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "extra",
        ),
        (
            "olive",
            format!("{MEMORY}/{id}/retract"),
            json!({"why": " "}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "why",
        ),
        (
            "olive",
            format!("{MEMORY}/{unknown}/correct"),
            json!({"text": "x"}).to_string(),
            StatusCode::NOT_FOUND,
            "not_found",
            "no memory entry",
        ),
        (
            "olive",
            format!("{MEMORY}/not-an-id/retract"),
            json!({"why": "x"}).to_string(),
            StatusCode::NOT_FOUND,
            "not_found",
            "no memory entry",
        ),
        (
            "rita",
            MEMORY.to_owned(),
            external("mine"),
            StatusCode::FORBIDDEN,
            "forbidden",
            "memory.manage",
        ),
        (
            "sam",
            format!("{MEMORY}/{id}/retract"),
            json!({"why": "x"}).to_string(),
            StatusCode::FORBIDDEN,
            "forbidden",
            "memory.manage",
        ),
    ];
    for (who, path, body, status, code, says) in &cases {
        let answer = app.as_(who, Method::POST, path, body).await;
        let error = answer.assert_error(*status, code);
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{who} POST {path} {body}: {error}"
        );
    }
    assert_eq!(
        revision(&app).await,
        before,
        "a refused request decided something"
    );

    // Provenance the Room does not have is refused by M1 (a 409; the refusal is a decision).
    let answer = app
        .as_(
            "olive",
            Method::POST,
            MEMORY,
            &json!({"text": "x", "provenance": {"from": "contribution", "id": unknown}})
                .to_string(),
        )
        .await;
    let error = answer.assert_error(StatusCode::CONFLICT, "rule_refused");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("no contribution"),
        "{error}"
    );
    assert_eq!(listed(&app, "olive").await.len(), 1);
}
