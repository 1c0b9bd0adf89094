//! Operator inputs over REST: accepted once per `Idempotency-Key` (the store decides each
//! input id once), and refused by a rule as a 409 naming the rule, with nothing changed.

use axum::http::{Method, StatusCode};
use serde_json::Value;

use crate::support::{App, spawn_app};

const RAISE: &str = "/v1/rooms/local/budget/raise";

async fn raise(app: &App, key: &str, amount: i64) -> crate::support::Answer {
    let auth = format!("Bearer {}", app.token("oscar"));
    app.call(
        Method::POST,
        RAISE,
        &[
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
            ("idempotency-key", key),
        ],
        format!(r#"{{"amount_micros":{amount}}}"#),
    )
    .await
}

fn limit(budget: &Value) -> i64 {
    budget["balances"]["limit"].as_i64().unwrap()
}

/// B4 once per key: a retried raise with the same Idempotency-Key is answered with the
/// original decision (its revision and log, `already_done`) and raises nothing again — the
/// limit, the ledger and the Room's revision stay as the first left them. The same key on a
/// different raise is another input, decided on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b4_a_raise_retried_with_one_idempotency_key_raises_once() {
    let app = spawn_app().await;
    let (_, before) = app.snapshot().await;
    let first = raise(&app, "raise-1", 1_000).await;
    assert_eq!(first.status, StatusCode::OK, "{first:?}");
    let first = first.json();
    assert_eq!(first["decided"], true, "{first}");
    assert_eq!(first["log"][0]["rule"], "B4", "{first}");
    let after_first = app.snapshot().await;
    assert_eq!(limit(&after_first.1), limit(&before) + 1_000);

    let retry = raise(&app, "raise-1", 1_000).await;
    assert_eq!(retry.status, StatusCode::OK, "{retry:?}");
    let retry = retry.json();
    assert_eq!(retry["decided"], false, "{retry}");
    assert_eq!(retry["already_done"], true, "{retry}");
    assert_eq!(
        retry["revision"], first["revision"],
        "the original revision"
    );
    assert_eq!(retry["log"], first["log"], "the original decision");
    assert_eq!(
        app.snapshot().await,
        after_first,
        "the retry changed nothing"
    );

    // The same key for a different request is not confused with the first.
    let other = raise(&app, "raise-1", 2_000).await;
    assert_eq!(other.status, StatusCode::OK, "{other:?}");
    assert_eq!(other.json()["decided"], true, "{other:?}");
    let (_, budget) = app.snapshot().await;
    assert_eq!(limit(&budget), limit(&before) + 3_000);
    // Without a key every request is its own input.
    let auth = format!("Bearer {}", app.token("oscar"));
    let headers = [("authorization", auth.as_str())];
    for _ in 0..2 {
        let plain = app
            .call(Method::POST, RAISE, &headers, r#"{"amount_micros":5}"#)
            .await;
        assert_eq!(plain.json()["decided"], true, "{plain:?}");
    }
    let (_, budget) = app.snapshot().await;
    assert_eq!(limit(&budget), limit(&before) + 3_010);
}

/// B4: a raise the ledger refuses (the limit would overflow) is a 409 naming the rule, and
/// changes neither the limit nor the ledger; its retry is refused alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b4_a_refused_raise_is_409_with_its_rule_and_changes_nothing() {
    let app = spawn_app().await;
    let (_, before) = app.snapshot().await;
    for _ in 0..2 {
        let refused = raise(&app, "too-much", i64::MAX).await;
        let body = refused.assert_error(StatusCode::CONFLICT, "rule_refused");
        assert_eq!(body["rule"], "B4", "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("not raised"),
            "{body}"
        );
        assert!(body["revision"].as_i64().is_some(), "{body}");
    }
    let (_, after) = app.snapshot().await;
    assert_eq!(after["balances"], before["balances"]);
    assert_eq!(after["entries"], before["entries"], "no ledger row");
}

/// D3: a control the objective's state refuses (resuming a running objective) is a 409
/// naming the rule; the objective's status and control revision are unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_refused_control_is_409_with_its_rule_and_changes_nothing() {
    let app = spawn_app().await;
    app.post(
        "olive",
        "/v1/rooms/local/events",
        r#"{"kind":"owner_message","text":"Summarize what changed in durable agent runtimes, with sources for every claim."}"#,
    )
    .await;
    app.settle().await;
    let objectives = app.get("olive", "/v1/rooms/local/objectives").await;
    let id = objectives["items"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/rooms/local/objectives/{id}");
    let before = app.get("olive", &path).await;
    assert_ne!(before["status"], "paused", "{before}");
    let refused = app
        .as_(
            "olive",
            Method::POST,
            &format!("{path}/control"),
            r#"{"action":"resume"}"#,
        )
        .await;
    let body = refused.assert_error(StatusCode::CONFLICT, "rule_refused");
    assert_eq!(body["rule"], "D3", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("not paused"),
        "{body}"
    );
    let after = app.get("olive", &path).await;
    assert_eq!(after["status"], before["status"]);
    assert_eq!(after["control_revision"], before["control_revision"]);
    // The refusal is in the decision log, with its rule.
    let decisions = app
        .get("olive", &format!("{path}/decisions?limit=200"))
        .await;
    let refusals: Vec<&Value> = decisions["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["verdict"] == "rejected" && d["rule"] == "D3")
        .collect();
    assert_eq!(refusals.len(), 1, "{decisions}");
}

/// The decision log is read from the store's history in pages: every entry of the objective
/// once, in commit order, whatever the page size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_log_pages_through_the_stored_history() {
    let app = spawn_app().await;
    app.post(
        "olive",
        "/v1/rooms/local/events",
        r#"{"kind":"owner_message","text":"Summarize what changed in durable agent runtimes, with sources for every claim."}"#,
    )
    .await;
    app.settle().await;
    let objectives = app.get("olive", "/v1/rooms/local/objectives").await;
    let id = objectives["items"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/rooms/local/objectives/{id}/decisions");
    for action in ["pause", "resume", "pause"] {
        app.post(
            "olive",
            &format!("/v1/rooms/local/objectives/{id}/control"),
            &format!(r#"{{"action":"{action}"}}"#),
        )
        .await;
    }
    let all = app.get("olive", &format!("{path}?limit=200")).await;
    assert_eq!(all["next_cursor"], Value::Null);
    let all = all["items"].as_array().unwrap().clone();
    assert!(all.len() >= 4, "{all:?}");
    assert!(all.iter().all(|d| d["objective"] == id.as_str()));
    let revisions: Vec<i64> = all
        .iter()
        .map(|d| d["revision"].as_i64().unwrap())
        .collect();
    assert!(revisions.windows(2).all(|w| w[0] <= w[1]), "{revisions:?}");
    let mut paged = Vec::new();
    let mut next = format!("{path}?limit=1");
    loop {
        let page = app.get("olive", &next).await;
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 1, "{page}");
        paged.extend(items.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(cursor) => next = format!("{path}?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(paged, all);
    let bad = app
        .as_("olive", Method::GET, &format!("{path}?cursor=abc"), "")
        .await;
    bad.assert_error(StatusCode::BAD_REQUEST, "bad_request");
}

/// The OpenAPI document says which routes take an Idempotency-Key and answer a rule's
/// refusal with a 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_idempotency_keys_and_409_refusals() {
    let app = spawn_app().await;
    let document = app
        .call(Method::GET, "/v1/openapi.json", &[], "")
        .await
        .json();
    let raise = &document["paths"]["/v1/rooms/{room}/budget/raise"]["post"];
    assert!(
        raise["responses"]["409"]["description"]
            .as_str()
            .unwrap()
            .contains("rule_refused"),
        "{raise}"
    );
    assert!(
        raise["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header"),
        "{raise}"
    );
    let budget = &document["paths"]["/v1/rooms/{room}/budget"]["get"];
    assert_eq!(budget["responses"]["409"], Value::Null, "{budget}");
}
