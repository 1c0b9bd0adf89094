//! Redaction over REST (issue 18): the owner (`content.redact`) redacts a memory entry; the
//! entry is listed with its redaction record instead of its texts, and the Room's redaction
//! records are listed for every member with `objective.read`; every bad request is a clear
//! 4xx and changes nothing; a second redaction is refused by M1 (409). Content redaction and
//! the 410 of redacted content are shown through the running `serve` (crates/cli/tests).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{App, spawn_app};

const MEMORY: &str = "/v1/rooms/local/memory";
const REDACTIONS: &str = "/v1/rooms/local/redactions";
const DIGEST: &str = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
const SECRET: &str = "The safe's combination is 31-7-22";

async fn revision(app: &App) -> Value {
    app.get("oscar", "/v1/rooms/local").await["revision"].clone()
}

/// A memory entry saying [`SECRET`]: its id.
async fn secret_entry(app: &App) -> String {
    let body = json!({"text": SECRET, "provenance": {"from": "external", "url": "https://example.org/safe", "digest": DIGEST}});
    app.post("olive", MEMORY, &body.to_string()).await;
    app.get("olive", &format!("{MEMORY}?limit=200")).await["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn redact(target: Value, reason: &str) -> String {
    json!({"target": target, "reason": reason}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m1_the_owner_redacts_a_memory_entry_and_its_record_takes_the_texts_place() {
    let app = spawn_app().await;
    let id = secret_entry(&app).await;
    let answer = app
        .post(
            "olive",
            REDACTIONS,
            &redact(json!({"kind": "memory", "entry": id}), "a combination"),
        )
        .await;
    assert_eq!(answer["log"][0]["verdict"], "accepted", "{answer}");
    assert_eq!(answer["log"][0]["rule"], "M1", "{answer}");
    assert!(!answer.to_string().contains("31-7-22"), "{answer}");
    // The entry stays listed, its texts gone, its record in their place.
    let entry = app.get("sam", &format!("{MEMORY}?limit=200")).await["items"][0].clone();
    assert_eq!(entry["id"], id.as_str());
    assert_eq!(entry["text"], "[redacted]");
    assert_eq!(entry["versions"][0]["text"], "[redacted]");
    assert_eq!(entry["redacted"]["by"], "olive", "{entry}");
    assert_eq!(entry["redacted"]["why"], "a combination");
    assert!(!entry.to_string().contains("31-7-22"), "{entry}");
    // The Room's records, for everyone who reads the Room.
    for who in ["olive", "oscar", "rita", "sam", "hank"] {
        let records = app.get(who, REDACTIONS).await;
        let items = records["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{who}: {records}");
        assert_eq!(
            items[0]["target"],
            json!({"kind": "memory", "entry": id}),
            "{records}"
        );
        assert!(
            items[0]["old_digest"]
                .as_str()
                .unwrap()
                .starts_with("sha256:"),
            "{records}"
        );
    }
    // Redacted already: refused by M1, the first record stays.
    let again = app
        .as_(
            "olive",
            Method::POST,
            REDACTIONS,
            &redact(json!({"kind": "memory", "entry": id}), "again"),
        )
        .await;
    let error = again.assert_error(StatusCode::CONFLICT, "rule_refused");
    assert_eq!(error["rule"], "M1", "{error}");
    assert_eq!(
        app.get("olive", REDACTIONS).await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m1_a_retry_with_the_same_idempotency_key_redacts_once() {
    let app = spawn_app().await;
    let id = secret_entry(&app).await;
    let auth = format!("Bearer {}", app.token("olive"));
    for _ in 0..2 {
        let answer = app
            .call(
                Method::POST,
                REDACTIONS,
                &[
                    ("authorization", &auth),
                    ("content-type", "application/json"),
                    ("idempotency-key", "redact-once"),
                ],
                redact(json!({"kind": "memory", "entry": id}), "a secret"),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    }
    assert_eq!(
        app.get("olive", REDACTIONS).await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_redaction_request_is_a_clear_4xx_and_changes_nothing() {
    let app = spawn_app().await;
    let id = secret_entry(&app).await;
    let unknown = "00000000-0000-4000-8000-00000000000e";
    let memory = json!({"kind": "memory", "entry": id});
    let before = revision(&app).await;
    let cases: Vec<(&str, String, StatusCode, &str, &str)> = vec![
        (
            "olive",
            redact(memory.clone(), "  "),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "blank",
        ),
        (
            "olive",
            redact(memory.clone(), &"x".repeat(501)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "at most 500",
        ),
        (
            "olive",
            json!({"target": memory}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "reason",
        ),
        (
            "olive",
            json!({"target": memory, "reason": "x", "extra": 1}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "extra",
        ),
        (
            "olive",
            redact(json!({"kind": "file", "entry": id}), "x"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "file",
        ),
        (
            "olive",
            redact(json!({"kind": "artifact", "digest": "md5:1"}), "x"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "digest",
        ),
        (
            "olive",
            redact(json!({"kind": "memory", "entry": "not-an-id"}), "x"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "UUID",
        ),
        (
            "olive",
            r#"{"target": {"kind": "memory""#.to_owned(),
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "JSON",
        ),
        (
            "olive",
            redact(json!({"kind": "memory", "entry": unknown}), "x"),
            StatusCode::NOT_FOUND,
            "not_found",
            "no memory entry",
        ),
        (
            "olive",
            redact(json!({"kind": "artifact", "digest": DIGEST}), "x"),
            StatusCode::NOT_FOUND,
            "not_found",
            "no contribution",
        ),
        (
            "oscar",
            redact(memory.clone(), "x"),
            StatusCode::FORBIDDEN,
            "forbidden",
            "content.redact",
        ),
        (
            "rita",
            redact(memory.clone(), "x"),
            StatusCode::FORBIDDEN,
            "forbidden",
            "content.redact",
        ),
    ];
    for (who, body, status, code, says) in &cases {
        let answer = app.as_(who, Method::POST, REDACTIONS, body).await;
        let error = answer.assert_error(*status, code);
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{who} POST {body}: {error}"
        );
    }
    assert_eq!(
        revision(&app).await,
        before,
        "a refused request decided something"
    );
    let entry = app.get("olive", &format!("{MEMORY}?limit=200")).await["items"][0].clone();
    assert_eq!(entry["text"], SECRET, "the entry is untouched");
    assert!(
        app.get("olive", REDACTIONS).await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // Content no contribution the caller may read names is not found, whatever its digest.
    for path in [
        format!("/v1/rooms/local/contents/{DIGEST}"),
        "/v1/rooms/local/contents/not-a-digest".to_owned(),
    ] {
        let answer = app.as_("olive", Method::GET, &path, "").await;
        answer.assert_error(StatusCode::NOT_FOUND, "not_found");
    }
}
