//! End-to-end tests of the REST API under `/v1`: the real server on port 0, the real
//! coordinator on a fresh SQLite database with the scripted agents of `scenarios/demo.toml`,
//! and real bearer tokens from the SQLite token store. Every network wait has a timeout, so a
//! hang fails the test instead of blocking CI.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod handshake;
mod hosted;
mod hygiene;
mod inputs;
mod members;
mod memory;
mod redactions;
mod signals;
mod support;

use std::collections::{BTreeSet, HashSet};

use agentroom_domain::engine::Effect;
use agentroom_domain::engine::{Audience, Notification};
use agentroom_domain::ids::{RoomId, Timestamp};
use agentroom_ports::conformance::Driver;
use agentroom_ports::{
    Clock, OperationStatus, ResolutionOutcome, RoomStore, SystemClock, TokenStore, WorkflowStore,
};
use agentroom_server::api::{Access, routes};
use axum::http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::time::timeout;

use support::{App, STEP, issue, local, spawn_app};

/// An objective id no Room has.
const UNKNOWN: &str = "00000000-0000-4000-8000-000000000000";

// ---------------------------------------------------------------------------------------------
// The role × endpoint matrix, written out: every route, the permission it needs, and exactly
// the roles that may use it (from the shipped policies/access.toml). `-` marks a public route.
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const MATRIX: &[(&str, &str, &str, &str)] = &[
    // method  path                                              permission           roles admitted
    ("GET",  "/v1/openapi.json",                                  "-",                  "owner operator reviewer specialist agent_host none"),
    ("GET",  "/metrics",                                          "operation.resolve",  "operator"),
    ("GET",  "/v1/rooms/{room}",                                  "objective.read",     "owner operator reviewer specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/members",                          "objective.read",     "owner operator reviewer specialist agent_host"),
    ("POST", "/v1/rooms/{room}/members",                          "membership.manage",  "owner"),
    ("POST", "/v1/rooms/{room}/members/{principal}/roles",        "membership.manage",  "owner"),
    ("POST", "/v1/rooms/{room}/members/{principal}/revoke",       "membership.manage",  "owner"),
    ("GET",  "/v1/rooms/{room}/memory",                           "objective.read",     "owner operator reviewer specialist agent_host"),
    ("POST", "/v1/rooms/{room}/memory",                           "memory.manage",      "owner operator"),
    ("POST", "/v1/rooms/{room}/memory/{entry}/correct",           "memory.manage",      "owner operator"),
    ("POST", "/v1/rooms/{room}/memory/{entry}/retract",           "memory.manage",      "owner operator"),
    ("GET",  "/v1/rooms/{room}/redactions",                       "objective.read",     "owner operator reviewer specialist agent_host"),
    ("POST", "/v1/rooms/{room}/redactions",                       "content.redact",     "owner"),
    ("GET",  "/v1/rooms/{room}/contents/{digest}",                "objective.read",     "owner operator reviewer specialist agent_host"),
    ("POST", "/v1/rooms/{room}/events",                           "event.post",         "owner operator reviewer specialist agent_host"),
    ("POST", "/v1/rooms/{room}/quotes",                           "budget.raise",       "operator"),
    ("POST", "/v1/rooms/{room}/messages/{event}/retry",           "objective.control",  "owner operator"),
    ("GET",  "/v1/rooms/{room}/objectives",                       "objective.read",     "owner operator reviewer specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/objectives/{objective}",           "objective.read",     "owner operator reviewer specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/objectives/{objective}/plans",     "objective.read",     "owner operator reviewer specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/objectives/{objective}/decisions", "objective.read",     "owner operator reviewer specialist agent_host"),
    ("POST", "/v1/rooms/{room}/objectives/{objective}/control",   "objective.control",  "owner operator"),
    ("POST", "/v1/rooms/{room}/objectives/{objective}/tasks",     "task.update_own",    "specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/objectives/{objective}/corrections", "objective.read",   "owner operator reviewer specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/objectives/{objective}/reviews",   "report.read",        "owner operator reviewer"),
    ("POST", "/v1/rooms/{room}/objectives/{objective}/reviews",   "review.record",      "reviewer"),
    ("GET",  "/v1/rooms/{room}/contributions/{contribution}",     "objective.read",     "owner operator reviewer specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/assignments",                       "task.update_own",    "specialist agent_host"),
    ("POST", "/v1/rooms/{room}/assignments/{operation}/result",    "task.update_own",    "specialist agent_host"),
    ("POST", "/v1/rooms/{room}/assignments/{operation}/wait",      "task.update_own",    "specialist agent_host"),
    ("POST", "/v1/rooms/{room}/assignments/{operation}/receipt",   "task.update_own",    "specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/late-results",                     "late_result.decide", "owner operator"),
    ("POST", "/v1/rooms/{room}/late-results/{operation}",         "late_result.decide", "owner operator"),
    ("GET",  "/v1/rooms/{room}/budget",                           "budget.read",        "owner operator"),
    ("POST", "/v1/rooms/{room}/budget/raise",                     "budget.raise",       "operator"),
    ("POST", "/v1/rooms/{room}/budget/acknowledge",               "budget.acknowledge", "operator"),
    ("GET",  "/v1/rooms/{room}/operations",                       "operation.resolve",  "operator"),
    ("POST", "/v1/rooms/{room}/operations/{operation}/resolve",   "operation.resolve",  "operator"),
    ("POST", "/v1/rooms/{room}/planning",                         "planning.use",       "owner operator reviewer specialist agent_host"),
    ("GET",  "/v1/rooms/{room}/notifications",                    "objective.read",     "owner operator reviewer specialist agent_host"),
];

/// The principal of each role in the matrix (`none`: a valid token, no membership).
const ROLE_HOLDERS: [(&str, &str); 6] = [
    ("owner", "olive"),
    ("operator", "oscar"),
    ("reviewer", "rita"),
    ("specialist", "sam"),
    ("agent_host", "hank"),
    ("none", "nora"),
];

fn concrete(path: &str) -> String {
    path.replace("{room}", "local")
        .replace("{objective}", UNKNOWN)
        .replace("{operation}", UNKNOWN)
        .replace("{contribution}", UNKNOWN)
        .replace("{event}", UNKNOWN)
        .replace("{entry}", UNKNOWN)
        .replace(
            "{digest}",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000",
        )
        .replace("{principal}", "nobody-here")
}

#[test]
fn every_route_of_the_router_is_in_the_matrix_and_every_matrix_row_is_a_route() {
    let served: BTreeSet<(String, String, String)> = routes()
        .into_iter()
        .map(|route| {
            let access = match route.access {
                Access::Public => "-".to_owned(),
                Access::Needs(permission) => permission.as_str().to_owned(),
            };
            (route.method.to_string(), route.path.to_owned(), access)
        })
        .collect();
    let listed: BTreeSet<(String, String, String)> = MATRIX
        .iter()
        .map(|(method, path, permission, _)| {
            (
                (*method).to_owned(),
                (*path).to_owned(),
                (*permission).to_owned(),
            )
        })
        .collect();
    let unlisted: Vec<_> = served.difference(&listed).collect();
    let missing: Vec<_> = listed.difference(&served).collect();
    assert!(
        unlisted.is_empty(),
        "routes the matrix does not list: {unlisted:?}"
    );
    assert!(
        missing.is_empty(),
        "matrix rows the router does not serve: {missing:?}"
    );
    assert_eq!(served.len(), MATRIX.len(), "a route is listed twice");
}

/// T3 at the API: every role the matrix leaves out gets a 403 naming the permission, and
/// every role it lists passes the guard (what follows is the endpoint's own answer: here a
/// 404 for an unknown id or a 422 for a body of the wrong shape, so nothing changes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_every_endpoint_refuses_every_role_the_matrix_leaves_out() {
    let app = spawn_app().await;
    let before = app.snapshot().await;
    for (method, path, permission, admitted) in MATRIX {
        let method: Method = method.parse().unwrap();
        for (role, who) in ROLE_HOLDERS {
            let body = if method == Method::POST {
                r#"{"unexpected_field": true}"#
            } else {
                ""
            };
            let url = concrete(path);
            let response = app
                .send(
                    method.clone(),
                    &url,
                    &[("authorization", &format!("Bearer {}", app.token(who)))],
                    body.to_owned(),
                )
                .await;
            let status = response.status();
            if admitted.split(' ').any(|r| r == role) {
                assert!(
                    status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
                    "{method} {path} refused {role} ({status})"
                );
                assert!(
                    !status.is_server_error(),
                    "{method} {path} as {role}: {status}"
                );
                drop(response);
            } else {
                let bytes = timeout(STEP, response.into_body().collect())
                    .await
                    .unwrap()
                    .unwrap()
                    .to_bytes();
                let body: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(
                    status,
                    StatusCode::FORBIDDEN,
                    "{method} {path} admitted {role}: {body}"
                );
                assert_eq!(body["error"], "forbidden", "{body}");
                assert_eq!(body["permission"], *permission, "{method} {path}: {body}");
                assert!(
                    body["message"].as_str().unwrap().contains(permission),
                    "{body}"
                );
            }
        }
    }
    assert_eq!(app.snapshot().await, before, "the matrix changed the room");
}

// ---------------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_valid_token_is_401_with_www_authenticate_bearer() {
    let app = spawn_app().await;
    let now = SystemClock.now();
    let (_, expired) = issue(
        &app.store,
        &local(),
        "olive",
        Some(Timestamp::from_millis(now.as_millis() - 1)),
    )
    .await;
    let (revoked_record, revoked) = issue(&app.store, &local(), "olive", None).await;
    app.store
        .revoke_token(&revoked_record.id, now)
        .await
        .unwrap();
    let unknown = format!("ar_{}_{}", "a".repeat(16), "b".repeat(64));
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        ("missing", vec![]),
        (
            "not bearer",
            vec![("authorization", format!("Basic {}", app.token("olive")))],
        ),
        (
            "malformed",
            vec![("authorization", "Bearer nonsense".to_owned())],
        ),
        (
            "unknown",
            vec![("authorization", format!("Bearer {unknown}"))],
        ),
        (
            "expired",
            vec![("authorization", format!("Bearer {expired}"))],
        ),
        (
            "revoked",
            vec![("authorization", format!("Bearer {revoked}"))],
        ),
        // No cookie authentication: a token in a cookie is no token.
        (
            "cookie",
            vec![("cookie", format!("token={}", app.token("olive")))],
        ),
    ];
    for (case, headers) in cases {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let answer = app
            .call(Method::GET, "/v1/rooms/local/objectives", &headers, "")
            .await;
        answer.assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
        assert_eq!(answer.headers["www-authenticate"], "Bearer", "{case}");
    }
    // The same token, valid, passes.
    app.get("olive", "/v1/rooms/local/objectives").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_one_room_never_reaches_another_room() {
    let app = spawn_app().await;
    let other = agentroom_domain::ids::RoomId::parse("other").unwrap();
    let (_, foreign) = issue(&app.store, &other, "olive", None).await;
    let auth = format!("Bearer {foreign}");
    for path in [
        "/v1/rooms/local",
        "/v1/rooms/local/objectives",
        "/v1/rooms/local/budget",
    ] {
        let answer = app
            .call(Method::GET, path, &[("authorization", &auth)], "")
            .await;
        answer.assert_error(StatusCode::NOT_FOUND, "not_found");
    }
    // And local's owner does not reach `other`.
    let answer = app.as_("olive", Method::GET, "/v1/rooms/other", "").await;
    answer.assert_error(StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_a_request_id_echoed_when_sane() {
    let app = spawn_app().await;
    let auth = format!("Bearer {}", app.token("olive"));
    let echoed = app
        .call(
            Method::GET,
            "/v1/rooms/local",
            &[("authorization", &auth), ("x-request-id", "trace-42.a_b")],
            "",
        )
        .await;
    assert_eq!(echoed.headers["x-request-id"], "trace-42.a_b");
    let insane = app
        .call(
            Method::GET,
            "/v1/rooms/local",
            &[
                ("authorization", &auth),
                ("x-request-id", "no spaces allowed"),
            ],
            "",
        )
        .await;
    let generated = insane.headers["x-request-id"].to_str().unwrap();
    assert_ne!(generated, "no spaces allowed");
    assert_eq!(generated.len(), 32, "{generated}");
    let refused = app.call(Method::GET, "/v1/rooms/local", &[], "").await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.headers.contains_key("x-request-id"));
    // The A2E transport mounted beside the API gets request ids too.
    let health = app
        .call(Method::GET, "/health", &[("x-request-id", "a2e-1")], "")
        .await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.headers["x-request-id"], "a2e-1");
}

/// T2/T3 at the API: authorization follows the principal's *current* membership, so a
/// revoked role takes effect on the token's next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_revoked_role_is_refused_on_the_next_request() {
    let app = spawn_app().await;
    app.get("sam", "/v1/rooms/local/objectives").await;
    app.coordinator
        .change_membership(
            &local(),
            agentroom_coordinator::InputId::named("revoke sam"),
            support::p("olive"),
            support::p("sam"),
            agentroom_domain::room::Role::Specialist,
            agentroom_domain::engine::MembershipChange::Revoke,
        )
        .await
        .unwrap();
    let answer = app
        .as_("sam", Method::GET, "/v1/rooms/local/objectives", "")
        .await;
    assert_eq!(
        answer.assert_error(StatusCode::FORBIDDEN, "forbidden")["permission"],
        "objective.read"
    );
}

/// T1: the author of a posted event is the token's principal; the same Idempotency-Key
/// posts it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_an_event_posted_twice_with_one_idempotency_key_is_accepted_once() {
    let app = spawn_app().await;
    let auth = format!("Bearer {}", app.token("olive"));
    let body = json!({"kind": "owner_message", "text": "Summarize what changed in durable agent runtimes, with sources for every claim."}).to_string();
    let headers = [
        ("authorization", auth.as_str()),
        ("idempotency-key", "msg-1"),
    ];
    let first = app
        .call(
            Method::POST,
            "/v1/rooms/local/events",
            &headers,
            body.clone(),
        )
        .await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{first:?}");
    let second = app
        .call(Method::POST, "/v1/rooms/local/events", &headers, body)
        .await;
    assert_eq!(second.status, StatusCode::ACCEPTED, "{second:?}");
    assert_eq!(first.json()["event"], second.json()["event"]);
    assert_eq!(second.json()["already_done"], true, "{second:?}");
    app.settle().await;
    let objectives = app.get("olive", "/v1/rooms/local/objectives").await;
    assert_eq!(objectives["items"].as_array().unwrap().len(), 1);
    assert_eq!(objectives["items"][0]["owner"], "olive");
    // The same key on another kind of request is another request: the pause is decided (D3).
    let control = format!(
        "/v1/rooms/local/objectives/{}/control",
        objectives["items"][0]["id"].as_str().unwrap()
    );
    let paused = app
        .call(Method::POST, &control, &headers, r#"{"action":"pause"}"#)
        .await;
    assert_eq!(paused.status, StatusCode::OK, "{paused:?}");
    assert_eq!(paused.json()["decided"], true, "{paused:?}");
    let objective = app
        .get(
            "olive",
            &format!(
                "/v1/rooms/local/objectives/{}",
                objectives["items"][0]["id"].as_str().unwrap()
            ),
        )
        .await;
    assert_eq!(objective["status"], "paused", "{objective}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_paginated_with_limit_and_cursor() {
    let app = spawn_app().await;
    let mut seen = Vec::new();
    let mut path = "/v1/rooms/local/members?limit=2".to_owned();
    loop {
        let page = app.get("rita", &path).await;
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 2, "{page}");
        seen.extend(
            items
                .iter()
                .map(|m| m["principal"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/rooms/local/members?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    // olive, oscar, sam, sue, rita and hank, each once.
    seen.sort();
    assert_eq!(seen, ["hank", "olive", "oscar", "rita", "sam", "sue"]);
}

// ---------------------------------------------------------------------------------------------
// Bad input: a clear 4xx, never a 500, nothing changed
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_4xx_and_changes_nothing() {
    let app = spawn_app().await;
    let before = app.snapshot().await;
    let oversized = format!(
        r#"{{"kind":"owner_message","text":"{}"}}"#,
        "x".repeat(70 * 1024)
    );
    let cases: Vec<(&str, Method, &str, String, StatusCode, &str, &str)> = vec![
        (
            "malformed JSON",
            Method::POST,
            "/v1/rooms/local/events",
            "{not json".to_owned(),
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "not valid JSON",
        ),
        (
            "not an object",
            Method::POST,
            "/v1/rooms/local/events",
            "[1,2]".to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "does not fit",
        ),
        (
            "unknown field",
            Method::POST,
            "/v1/rooms/local/events",
            r#"{"kind":"owner_message","text":"hi","author":"oscar"}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "unknown field `author`",
        ),
        (
            "unknown kind",
            Method::POST,
            "/v1/rooms/local/events",
            r#"{"kind":"signal","note":"x"}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "unknown variant",
        ),
        (
            "missing field",
            Method::POST,
            "/v1/rooms/local/events",
            r#"{"kind":"owner_message"}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "missing field `text`",
        ),
        // Issue 17: a blank message would start a paid reasoner call; refused, not stored.
        (
            "blank owner message",
            Method::POST,
            "/v1/rooms/local/events",
            r#"{"kind":"owner_message","text":" \n\t "}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "text is blank",
        ),
        (
            "oversized",
            Method::POST,
            "/v1/rooms/local/events",
            oversized,
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "65536",
        ),
        (
            "wrong type",
            Method::POST,
            "/v1/rooms/local/budget/raise",
            r#"{"amount_micros":"lots"}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "invalid type",
        ),
        (
            "negative raise",
            Method::POST,
            "/v1/rooms/local/budget/raise",
            r#"{"amount_micros":-5}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "must be positive",
        ),
        (
            "unknown field in raise",
            Method::POST,
            "/v1/rooms/local/budget/raise",
            r#"{"amount_micros":5,"reset":true}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "unknown field `reset`",
        ),
        (
            "unknown objective",
            Method::GET,
            "/v1/rooms/local/objectives/00000000-0000-4000-8000-000000000000",
            String::new(),
            StatusCode::NOT_FOUND,
            "not_found",
            UNKNOWN,
        ),
        (
            "malformed objective id",
            Method::GET,
            "/v1/rooms/local/objectives/not-a-uuid",
            String::new(),
            StatusCode::NOT_FOUND,
            "not_found",
            "not-a-uuid",
        ),
        (
            "control of unknown objective",
            Method::POST,
            "/v1/rooms/local/objectives/00000000-0000-4000-8000-000000000000/control",
            r#"{"action":"pause"}"#.to_owned(),
            StatusCode::NOT_FOUND,
            "not_found",
            UNKNOWN,
        ),
        (
            "unknown late result",
            Method::POST,
            "/v1/rooms/local/late-results/00000000-0000-4000-8000-000000000000",
            r#"{"decision":"readmit"}"#.to_owned(),
            StatusCode::NOT_FOUND,
            "not_found",
            UNKNOWN,
        ),
        (
            "unknown room",
            Method::GET,
            "/v1/rooms/nowhere/objectives",
            String::new(),
            StatusCode::NOT_FOUND,
            "not_found",
            "nowhere",
        ),
        (
            "bad limit",
            Method::GET,
            "/v1/rooms/local/objectives?limit=0",
            String::new(),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "limit",
        ),
        (
            "bad cursor",
            Method::GET,
            "/v1/rooms/local/objectives?cursor=zz",
            String::new(),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "cursor",
        ),
        (
            "unknown query",
            Method::GET,
            "/v1/rooms/local/objectives?sort=asc",
            String::new(),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "sort",
        ),
    ];
    for (case, method, path, body, status, code, says) in cases {
        let who = if path.contains("budget/raise") {
            "oscar"
        } else {
            "olive"
        };
        let answer = app.as_(who, method, path, &body).await;
        let error = answer.assert_error(status, code);
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{case}: {error}"
        );
    }
    // Unknown fields of the review and control bodies, too.
    let answer = app
        .as_(
            "olive",
            Method::POST,
            "/v1/rooms/local/budget/acknowledge",
            r#"{"force":true}"#,
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::FORBIDDEN,
        "only operators acknowledge"
    );
    let answer = app
        .as_(
            "oscar",
            Method::POST,
            "/v1/rooms/local/budget/acknowledge",
            r#"{"force":true}"#,
        )
        .await;
    answer.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body");
    assert_eq!(app.snapshot().await, before, "bad input changed the room");
}

/// A2E planning messages tolerate unknown fields (the SDK sends extras), unlike the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planning_messages_tolerate_unknown_fields_and_need_a_token() {
    let app = spawn_app().await;
    let ping = r#"{"type":"ping","req_id":"r1","sdk_extra":{"anything":1}}"#;
    let answer = app
        .as_("sam", Method::POST, "/v1/rooms/local/planning", ping)
        .await;
    assert!(answer.status.is_success(), "{answer:?}");
    let answer = app
        .call(Method::POST, "/v1/rooms/local/planning", &[], ping)
        .await;
    answer.assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
}

/// The A2E HTTP transport beside the API takes the same tokens: a bad token 401 (no token at
/// all makes a session its handshake must bind: `handshake.rs`), no `planning.use` 403, a
/// session made with the header needs it on `/send`, and a session is found only by callers
/// of its Room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2e_sessions_authenticate_with_bearer_tokens() {
    let app = spawn_app().await;
    for bad in ["Bearer ar_not-a-token", "Basic c2FtOnNhbQ==", ""] {
        let refused = app
            .call(Method::POST, "/session", &[("authorization", bad)], "")
            .await;
        refused.assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
        assert_eq!(refused.headers["www-authenticate"], "Bearer");
    }
    let nora = app.as_("nora", Method::POST, "/session", "").await;
    assert_eq!(
        nora.assert_error(StatusCode::FORBIDDEN, "forbidden")["permission"],
        "planning.use"
    );
    let created = app.as_("sam", Method::POST, "/session", "").await;
    assert_eq!(created.status, StatusCode::OK, "{created:?}");
    let session = created.json()["session_id"].as_str().unwrap().to_owned();
    let ping = r#"{"type":"ping","req_id":"p1"}"#;
    let sam = format!("Bearer {}", app.token("sam"));
    let sent = app
        .call(
            Method::POST,
            "/send",
            &[("authorization", &sam), ("x-session-id", &session)],
            ping,
        )
        .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{sent:?}");
    // Made with the header, the session needs it.
    let bare = app
        .call(Method::POST, "/send", &[("x-session-id", &session)], ping)
        .await;
    bare.assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
    // A token of another Room does not find the session.
    let other = agentroom_domain::ids::RoomId::parse("other").unwrap();
    let (_, foreign) = issue(&app.store, &other, "sam", None).await;
    let foreign = format!("Bearer {foreign}");
    let lost = app
        .call(
            Method::POST,
            "/send",
            &[("authorization", &foreign), ("x-session-id", &session)],
            ping,
        )
        .await;
    assert_eq!(lost.status, StatusCode::NOT_FOUND, "{lost:?}");
    // POST /v1/planning too.
    let answer = app.as_("sam", Method::POST, "/v1/planning", ping).await;
    assert!(answer.status.is_success(), "{answer:?}");
    let answer = app.call(Method::POST, "/v1/planning", &[], ping).await;
    answer.assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
    // Health stays open.
    let health = app.call(Method::GET, "/health", &[], "").await;
    assert_eq!(health.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_lists_every_route_with_its_permission() {
    let app = spawn_app().await;
    let answer = app.call(Method::GET, "/v1/openapi.json", &[], "").await;
    assert_eq!(answer.status, StatusCode::OK);
    let doc = answer.json();
    assert_eq!(doc["openapi"], "3.1.0");
    for (method, path, permission, _) in MATRIX {
        let operation = &doc["paths"][*path][method.to_ascii_lowercase()];
        assert!(
            operation.is_object(),
            "{method} {path} missing from the document"
        );
        if *permission != "-" {
            assert_eq!(operation["x-permission"], *permission, "{method} {path}");
        }
        // Every POST documents the body it reads.
        if *method == "POST" {
            assert!(
                operation["requestBody"]["content"]["application/json"]["schema"].is_object(),
                "{method} {path} has no request body schema"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Uncertain and dead-lettered operations
// ---------------------------------------------------------------------------------------------

/// D2: operators see the Room's uncertain operations and record what they confirmed, with
/// who (the token's principal) and why; nobody else may, a second resolution changes nothing,
/// and another Room's token does not reach the operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_operators_resolve_uncertain_operations_and_nobody_else_does() {
    let app = spawn_app().await;
    let mut drill = Driver::create(&*app.store, "drill", 1_000_000).await;
    let decision = drill.owner_message("an owner message whose call is left uncertain");
    let op = decision
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::ReserveAndCall(request) => Some(request.op),
            _ => None,
        })
        .unwrap();
    drill
        .commit(&*app.store, &decision, "event_accepted")
        .await
        .unwrap();
    assert!(app.store.mark_uncertain(op, 1).await.unwrap());
    let room = drill.room();
    let (_, oscar) = issue(&app.store, &room, "oscar", None).await;
    let (_, olive) = issue(&app.store, &room, "olive", None).await;
    let as_oscar = format!("Bearer {oscar}");
    let as_olive = format!("Bearer {olive}");

    let listed = app
        .call(
            Method::GET,
            "/v1/rooms/drill/operations",
            &[("authorization", &as_oscar)],
            "",
        )
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{listed:?}");
    let items = listed.json()["items"].clone();
    assert_eq!(items.as_array().unwrap().len(), 1, "{items}");
    assert_eq!(items[0]["op"], op.to_string());
    assert_eq!(items[0]["status"], "uncertain");

    let path = format!("/v1/rooms/drill/operations/{op}/resolve");
    let body = r#"{"outcome":"failed","reason":"the provider's log shows no request"}"#;
    let refused = app
        .call(Method::POST, &path, &[("authorization", &as_olive)], body)
        .await;
    assert_eq!(
        refused.assert_error(StatusCode::FORBIDDEN, "forbidden")["permission"],
        "operation.resolve"
    );
    for (bad, code) in [
        (r#"{"outcome":"failed","reason":"  "}"#, "invalid_body"),
        (r#"{"outcome":"maybe","reason":"x"}"#, "invalid_body"),
        (
            r#"{"outcome":"failed","reason":"x","operator":"someone-else"}"#,
            "invalid_body",
        ),
    ] {
        let answer = app
            .call(Method::POST, &path, &[("authorization", &as_oscar)], bad)
            .await;
        answer.assert_error(StatusCode::UNPROCESSABLE_ENTITY, code);
    }
    // From another Room, the operation does not exist.
    let foreign = app
        .as_(
            "oscar",
            Method::POST,
            &format!("/v1/rooms/local/operations/{op}/resolve"),
            body,
        )
        .await;
    foreign.assert_error(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(
        app.store.operation(op).await.unwrap().unwrap().status,
        OperationStatus::Uncertain
    );

    let resolved = app
        .call(Method::POST, &path, &[("authorization", &as_oscar)], body)
        .await;
    assert_eq!(resolved.status, StatusCode::OK, "{resolved:?}");
    let record = app.store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Resolved);
    let resolution = record.resolution.unwrap();
    assert_eq!(
        resolution.operator, "oscar",
        "the author is the token's principal"
    );
    assert_eq!(resolution.outcome, ResolutionOutcome::Failed);

    let again = app
        .call(Method::POST, &path, &[("authorization", &as_oscar)], body)
        .await;
    again.assert_error(StatusCode::CONFLICT, "wrong_state");
}

// ---------------------------------------------------------------------------------------------
// The notification stream
// ---------------------------------------------------------------------------------------------

/// Reads Server-Sent Events from `response` until `n` events arrived; returns their ids.
async fn read_events(response: hyper::Response<hyper::body::Incoming>, n: usize) -> Vec<String> {
    let mut body = response.into_body();
    let mut text = String::new();
    let mut ids = Vec::new();
    while ids.len() < n {
        let frame = timeout(STEP, body.frame())
            .await
            .expect("no event in time")
            .expect("the stream ended")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            text.push_str(std::str::from_utf8(&data).unwrap());
        }
        while let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            if let Some(id) = event.lines().find_map(|l| l.strip_prefix("id: ")) {
                ids.push(id.to_owned());
            }
        }
    }
    ids
}

fn for_reviewer(notification: &Notification) -> bool {
    match &notification.audience {
        Audience::Reviewers => true,
        Audience::Principal(p) => p.as_str() == "rita",
        Audience::Owners | Audience::Operators => false,
    }
}

fn reviewer_ids(app: &App) -> Vec<String> {
    app.feed
        .notifications(&local())
        .iter()
        .filter(|n| for_reviewer(n))
        .map(|n| n.id.to_string())
        .collect()
}

/// T5 at the edge: the stream resumes after `Last-Event-ID` and never sends a stable id twice;
/// a dropped connection cancels nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t5_stream_resumes_from_last_event_id_and_never_repeats_an_id() {
    let app = spawn_app().await;
    let text = "Summarize what changed in durable agent runtimes, with sources for every claim.";
    let auth = format!("Bearer {}", app.token("rita"));
    // The reviewer connects, then the owner's message runs to report v1 awaiting review.
    let first = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["content-type"], "text/event-stream");
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &json!({"kind": "owner_message", "text": text}).to_string(),
    )
    .await;
    app.settle().await;
    let before = reviewer_ids(&app);
    assert_eq!(before.len(), 1, "{:?}", app.feed.notifications(&local()));
    // The connection reads that event and drops.
    let got = read_events(first, 1).await;
    assert_eq!(got, before);
    // Work goes on without it: the reviewer finds a criterion unmet, and the corrective plan
    // runs to report v2, which awaits review again.
    let objectives = app.get("olive", "/v1/rooms/local/objectives").await;
    let path = format!(
        "/v1/rooms/local/objectives/{}",
        objectives["items"][0]["id"].as_str().unwrap()
    );
    review(&app, &path, 1, "unmet").await;
    app.settle().await;
    let after = reviewer_ids(&app);
    assert_eq!(after.len(), 2, "{:?}", app.feed.notifications(&local()));
    assert_eq!(after[..1], before[..]);
    // Resuming after the id it saw sends only the new one.
    let resumed = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &auth), ("last-event-id", &got[0])],
            "",
        )
        .await;
    let mut rest = read_events(resumed, 1).await;
    assert_eq!(rest, after[1..]);
    // Delivering the outbox again (at least once, T5) adds no id; a fresh connection without
    // Last-Event-ID gets every id once.
    app.coordinator.deliver_notifications().await.unwrap();
    assert_eq!(reviewer_ids(&app), after);
    let fresh = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &auth)],
            "",
        )
        .await;
    let all = read_events(fresh, 2).await;
    assert_eq!(all, after);
    rest.extend(got);
    let distinct: HashSet<&String> = rest.iter().collect();
    assert_eq!(distinct.len(), 2, "an id came twice: {rest:?}");
}

/// A graceful shutdown ends open notification streams instead of waiting for their clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_ends_open_streams() {
    let mut app = spawn_app().await;
    let auth = format!("Bearer {}", app.token("olive"));
    let stream = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(stream.status(), StatusCode::OK);
    app.shut_down().await;
    // The stream ends (its body completes) rather than hanging.
    let mut body = stream.into_body();
    loop {
        match timeout(STEP, body.frame()).await.expect("the stream hangs") {
            None | Some(Err(_)) => break,
            Some(Ok(_)) => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A whole objective through the HTTP API alone
// ---------------------------------------------------------------------------------------------

fn task<'a>(objective: &'a Value, key: &str) -> &'a Value {
    objective["board"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["tasks"].as_array().unwrap())
        .find(|t| t["key"] == key)
        .unwrap_or_else(|| panic!("no task {key} on {objective}"))
}

/// Each specialist sees only its own tasks, confirms its completed ones with their
/// contribution (T2), and may not touch the other's; returns how many were confirmed.
async fn specialists_confirm(app: &App, objective_path: &str) -> usize {
    let mut confirmed = 0;
    for (me, other) in [("sam", "sue"), ("sue", "sam")] {
        let objective = app.get(me, objective_path).await;
        for column in objective["board"]["columns"].as_array().unwrap() {
            for task in column["tasks"].as_array().unwrap() {
                assert_eq!(task["assignee"], me, "{me} sees another's task: {task}");
                let Some(contribution) = task["state"]["contribution"].as_str() else {
                    continue;
                };
                let update = json!({
                    "task": task["identity"],
                    "status": "done",
                    "contribution": contribution,
                })
                .to_string();
                let tasks = format!("{objective_path}/tasks");
                let refused = app.as_(other, Method::POST, &tasks, &update).await;
                refused.assert_error(StatusCode::FORBIDDEN, "refused");
                let answer = app.post(me, &tasks, &update).await;
                if answer["decided"] == true {
                    assert_eq!(answer["accepted"], true, "{answer}");
                    assert_eq!(answer["log"][0]["rule"], "T2", "{answer}");
                    confirmed += 1;
                }
            }
        }
    }
    confirmed
}

async fn review(app: &App, objective_path: &str, version: u64, covers_2026: &str) -> Value {
    let reviews = app.get("rita", &format!("{objective_path}/reviews")).await;
    assert_eq!(reviews["awaiting_review"]["version"], version, "{reviews}");
    let (source, quote) = evidence(&reviews, version);
    let body = json!({
        "report_version": version,
        "observed": reviews["observed"],
        "verdicts": [
            {"criterion": "cites-sources", "verdict": "met", "evidence": "every claim cites a contribution", "sources": [source], "quote": quote},
            {"criterion": "covers-2026", "verdict": covers_2026, "evidence": format!("checked report version {version}"), "sources": [source], "quote": quote},
        ],
    });
    // R1/T3: the owner cannot record a review.
    let refused = app
        .as_(
            "olive",
            Method::POST,
            &format!("{objective_path}/reviews"),
            &body.to_string(),
        )
        .await;
    assert_eq!(refused.json()["permission"], "review.record");
    app.post(
        "rita",
        &format!("{objective_path}/reviews"),
        &body.to_string(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_objective_runs_through_the_http_api_alone() {
    let app = spawn_app().await;
    // The owner posts the message: persisted with olive as author (T1), accepted by id.
    let text = "Summarize what changed in durable agent runtimes, with sources for every claim.";
    let posted = app
        .post(
            "olive",
            "/v1/rooms/local/events",
            &json!({"kind": "owner_message", "text": text}).to_string(),
        )
        .await;
    assert!(posted["event"].is_string(), "{posted}");
    app.settle().await;

    let objectives = app.get("olive", "/v1/rooms/local/objectives").await;
    assert_eq!(
        objectives["items"].as_array().unwrap().len(),
        1,
        "{objectives}"
    );
    let id = objectives["items"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/rooms/local/objectives/{id}");
    let objective = app.get("olive", &path).await;
    assert_eq!(objective["owner"], "olive");
    assert_eq!(task(&objective, "gather")["column"], "done", "{objective}");
    assert_eq!(task(&objective, "write")["column"], "done", "{objective}");

    // The specialists confirm their own work; the reviewer finds one criterion unmet (R3).
    assert_eq!(specialists_confirm(&app, &path).await, 2);
    // O7: an agent cannot move work back; the domain rejects it by rule, the board stays.
    let gather = task(&objective, "gather")["identity"].clone();
    let moved = app
        .as_(
            "sam",
            Method::POST,
            &format!("{path}/tasks"),
            &json!({"task": gather, "status": "todo"}).to_string(),
        )
        .await;
    let moved = moved.assert_error(StatusCode::CONFLICT, "rule_refused");
    assert_eq!(moved["rule"], "O7", "{moved}");
    assert_eq!(app.get("olive", &path).await["board"], objective["board"]);
    let unmet = review(&app, &path, 1, "unmet").await;
    assert_eq!(unmet["accepted"], true, "{unmet}");
    app.settle().await;

    // The corrective plan ran: the research is reused (O3), new work and report version 2.
    let plans = app.get("olive", &format!("{path}/plans")).await;
    let versions = plans["items"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{plans}");
    assert_eq!(
        versions[1]["diff"]["added"],
        json!(["benchmarks"]),
        "{plans}"
    );
    assert_eq!(versions[1]["diff"]["changed"], json!(["write"]), "{plans}");
    assert_eq!(versions[1]["diff"]["reused"], json!(["gather"]), "{plans}");
    // gather (reused, its plan-1 contribution), benchmarks and write.
    assert_eq!(specialists_confirm(&app, &path).await, 3);
    let met = review(&app, &path, 2, "met").await;
    assert_eq!(met["accepted"], true, "{met}");
    app.settle().await;

    let objective = app.get("olive", &path).await;
    assert_eq!(objective["status"], "completed", "{objective}");
    // Issue 21: completed and settled, it left the live state for its record in the commit
    // that closed it; every endpoint reads it back as before, and its assignees may still
    // confirm their work done (T2, proven by the record).
    let live = app
        .store
        .load(&RoomId::parse("local").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(live.state.objectives().is_empty(), "open work only");
    let record = app
        .store
        .objective_record(live.state.room(), id.parse().unwrap())
        .await
        .unwrap();
    assert!(record.is_some(), "its record holds it");
    let listed = app.get("olive", "/v1/rooms/local/objectives").await;
    assert_eq!(listed["items"][0]["status"], "completed", "{listed}");
    let room = app.get("olive", "/v1/rooms/local").await;
    assert_eq!(room["objectives"][0]["id"], id.as_str(), "{room}");
    assert_eq!(specialists_confirm(&app, &path).await, 3);
    let reviews = app.get("olive", &format!("{path}/reviews")).await;
    let done = reviews["reviews"].as_array().unwrap();
    assert_eq!(done.len(), 2, "{reviews}");
    assert!(done.iter().all(|r| r["reviewer"] == "rita"));
    assert_eq!(done[1]["outcome"], "all_met", "{reviews}");
    assert_eq!(
        done[1]["verdicts"][1]["evidence"],
        "checked report version 2"
    );
    assert!(
        reviews["reports"][1]["source_set"]["digest"].is_string(),
        "{reviews}"
    );

    // The decision log names the rule of each rejection: the owner's stale review attempt is
    // not there (it never passed the API), the agents' confirmations are (T2).
    let decisions = app
        .get("oscar", &format!("{path}/decisions?limit=200"))
        .await;
    let entries = decisions["items"].as_array().unwrap();
    assert!(entries.iter().any(|e| e["rule"] == "T2"), "{decisions}");
    assert!(
        entries
            .iter()
            .any(|e| e["verdict"] == "rejected" && e["rule"] == "O7"),
        "{decisions}"
    );
    assert!(
        entries
            .iter()
            .filter(|e| e["verdict"] == "rejected")
            .all(|e| e["rule"].is_string())
    );

    // The operator reads the ledger: cost by objective and role adds up to what was spent.
    let budget = app.get("oscar", "/v1/rooms/local/budget?limit=200").await;
    let spent = budget["balances"]["spent"].as_i64().unwrap();
    assert!(spent > 0, "{budget}");
    let by_role: i64 = budget["spent_micros_by_role"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(by_role, spent, "{budget}");
    // Cost by model: every call here ran on the scripted model, which its receipts name.
    assert_eq!(
        budget["spent_micros_by_model"],
        json!({"scripted": spent}),
        "{budget}"
    );
    // Every call is booked to the objective, the reasoner call that created it included.
    assert_eq!(
        budget["spent_micros_by_objective"],
        json!({ id.clone(): spent }),
        "{budget}"
    );
    // Only operators raise the limit (B4): the owner is refused, the operator raises it.
    let refused = app
        .as_(
            "olive",
            Method::POST,
            "/v1/rooms/local/budget/raise",
            r#"{"amount_micros":1000}"#,
        )
        .await;
    assert_eq!(refused.json()["permission"], "budget.raise");
    let limit = budget["balances"]["limit"].as_i64().unwrap();
    app.post(
        "oscar",
        "/v1/rooms/local/budget/raise",
        r#"{"amount_micros":1000}"#,
    )
    .await;
    let budget = app.get("oscar", "/v1/rooms/local/budget").await;
    assert_eq!(budget["balances"]["limit"].as_i64(), Some(limit + 1000));
    assert_eq!(
        budget["balances"]["spent"].as_i64(),
        Some(spent),
        "B4: spend is not reset"
    );

    // The operator's metrics agree with the ledger and count the calls by role and status
    // (four specialist calls: gather, write, benchmarks, write again; gather is reused, O3),
    // read from counters; they are not public (issue 17): no token 401, a role that may not
    // read operations 403.
    app.call(Method::GET, "/metrics", &[], "")
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
    let refused = app.as_("olive", Method::GET, "/metrics", "").await;
    refused.assert_error(StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(refused.json()["permission"], "operation.resolve");
    let metrics = app.as_("oscar", Method::GET, "/metrics", "").await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(
        metrics.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = metrics.body;
    assert!(
        text.contains(&format!(
            "agentroom_budget_micros{{part=\"spent\"}} {spent}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("agentroom_calls_total{role=\"specialist\"} 4\n"),
        "{text}"
    );
    assert!(
        text.contains("agentroom_decisions_total{verdict=\"accepted\",rule=\"T2\"}"),
        "{text}"
    );
    assert!(
        text.contains("agentroom_http_responses_total{code=\"403\"}"),
        "{text}"
    );
}

/// Evidence for a `met` on report `version` as R7 asks: its first source and the first line
/// of its body, read from the reviews the API shows.
fn evidence(reviews: &Value, version: u64) -> (String, String) {
    let report = reviews["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["version"] == version)
        .unwrap_or_else(|| panic!("no report v{version}: {reviews}"));
    let content = &report["content"];
    let source = content["sources"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("report v{version} cites nothing: {report}"))
        .to_owned();
    let quote = content["body"]
        .as_str()
        .unwrap_or_else(|| panic!("report v{version} has no body: {report}"))
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap()
        .to_owned();
    (source, quote)
}
