//! T3 over the A2E HTTP transport for clients that send no headers: a session made without
//! `Authorization` is unbound until its handshake's `auth_token` binds it to the token's
//! principal, by the REST guard's own check. Every line sent is an A2E-PROTOCOL.md line (its
//! handshake with the token in `auth_token`), every reply is checked as the SDK client checks
//! it (`check_envelope`: `code`, `detail` an object, `req_id`, `success`).

use std::collections::HashMap;
use std::time::Duration;

use agentroom_planning::conformance::check_envelope;
use agentroom_ports::{Clock, SystemClock, TokenStore};
use axum::http::{Method, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::time::{sleep, timeout};

use super::hosted::objective_with_sams_gather;
use super::support::{Answer, App, STEP, issue, local, spawn_app, spawn_app_configured};

/// A2E-PROTOCOL.md's handshake line with `token` as its `auth_token` and `id` as its id.
fn handshake(id: &str, token: &str) -> String {
    format!(
        r#"{{"type":"handshake/req","id":"{id}","version":"1.0","ts":1764460800.0,"agent_id":"ag","agent_caps":["planning"],"auth_token":"{token}"}}"#
    )
}

// A2E-PROTOCOL.md's other example lines.
const TASK_ADD: &str = r#"{"type":"planning/task/add","id":"a2","version":"1.0","ts":1764460801.0,"plan_id":"p1","title":"write spec","status":"todo","description":"","assignee":"","deps":[],"metadata":{}}"#;
const PLAN_DELETE: &str =
    r#"{"type":"planning/plan/delete","id":"a3","version":"1.0","ts":1764460802.0}"#;
const PLAN_CREATE: &str = r#"{"type":"planning/plan/create","id":"a4","version":"1.0","ts":1764460803.0,"name":"release","columns":[],"description":""}"#;
const PLAN_LIST: &str =
    r#"{"type":"planning/plan/list","id":"a5","version":"1.0","ts":1764460804.0}"#;
const PING: &str = r#"{"type":"ping","id":"a6","version":"1.0","ts":1764460805.0}"#;
const PONG: &str = r#"{"type":"pong","id":"a7","version":"1.0","ts":1764460806.0,"req_id":"x"}"#;

/// A session of the A2E HTTP transport and its connected stream, spoken to as the SDK's
/// `HTTPTransport` does, with `auth` as its `Authorization` header on every request (none
/// for a client that sends no headers).
struct Client<'a> {
    app: &'a App,
    auth: Option<String>,
    id: String,
    stream: Events,
}

impl<'a> Client<'a> {
    /// `POST /session` (no body), then `GET /stream`, both with `auth`.
    async fn open(app: &'a App, auth: Option<String>) -> Client<'a> {
        let headers: Vec<(&str, &str)> = auth
            .iter()
            .map(|auth| ("authorization", auth.as_str()))
            .collect();
        let created = app.call(Method::POST, "/session", &headers, "").await;
        assert_eq!(created.status, StatusCode::OK, "{created:?}");
        let id = created.json()["session_id"].as_str().unwrap().to_owned();
        let mut headers = headers;
        headers.push(("x-session-id", &id));
        headers.push(("accept", "text/event-stream"));
        let response = app.send(Method::GET, "/stream", &headers, "").await;
        assert_eq!(response.status(), StatusCode::OK, "{response:?}");
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Client {
            app,
            auth,
            stream: Events {
                body: response.into_body(),
                buffer: Vec::new(),
                replies: HashMap::new(),
            },
            id,
        }
    }

    /// A session made without a header, as a client that sends none.
    async fn bare(app: &'a App) -> Client<'a> {
        Self::open(app, None).await
    }

    /// A session made with `who`'s bearer token.
    async fn with_header(app: &'a App, who: &str) -> Client<'a> {
        Self::open(app, Some(format!("Bearer {}", app.token(who)))).await
    }

    /// `POST /send` of `line` (text/plain, as the SDK sends it).
    async fn post(&self, line: &str) -> Answer {
        let mut headers = vec![
            ("content-type", "text/plain"),
            ("x-session-id", self.id.as_str()),
        ];
        if let Some(auth) = &self.auth {
            headers.push(("authorization", auth.as_str()));
        }
        self.app
            .call(Method::POST, "/send", &headers, line.to_owned())
            .await
    }

    /// Sends `line` and returns the reply to `req_id` from the stream.
    async fn ask(&mut self, line: &str, req_id: &str) -> Value {
        let sent = self.post(line).await;
        assert_eq!(sent.status, StatusCode::ACCEPTED, "{sent:?}");
        assert_eq!(sent.json(), json!({"ok": true}));
        self.stream.reply(req_id).await
    }

    /// Sends `line`, which must be answered with the A2E `error` `unauthorized` echoing
    /// `req_id`, with an object `detail`; returns the reply.
    async fn refused(&mut self, line: &str, req_id: &str) -> Value {
        let reply = self.ask(line, req_id).await;
        unauthorized(&reply, req_id);
        reply
    }

    /// The handshake with `token`, which must be accepted: `handshake/resp`, `ok`, this
    /// session's id, the planning capability.
    async fn binds(&mut self, req_id: &str, token: &str) {
        let reply = self.ask(&handshake(req_id, token), req_id).await;
        assert_eq!(reply["type"], "handshake/resp", "{reply}");
        assert_eq!(reply["req_id"], req_id, "{reply}");
        assert_eq!(reply["ok"], true, "{reply}");
        assert_eq!(reply["session_id"], self.id.as_str(), "{reply}");
        assert_eq!(
            reply["accepted_caps"],
            json!([{"capability": "planning", "enabled": true, "metadata": {}}]),
            "{reply}"
        );
    }
}

/// The A2E `error` `unauthorized` to `req_id`, as the SDK client accepts it.
fn unauthorized(reply: &Value, req_id: &str) {
    check_envelope(reply);
    assert_eq!(reply["type"], "error", "{reply}");
    assert_eq!(reply["code"], "unauthorized", "{reply}");
    assert_eq!(reply["req_id"], req_id, "{reply}");
    assert!(reply["detail"].is_object(), "{reply}");
    assert!(
        reply["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{reply}"
    );
}

/// A connected `/stream`, read strictly as the SDK reads it: one `data: <json>` line and a
/// blank line per event, keep-alive comments skipped, every message checked.
struct Events {
    body: Incoming,
    buffer: Vec<u8>,
    replies: HashMap<String, Value>,
}

impl Events {
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let event = String::from_utf8(event).unwrap();
                let lines: Vec<&str> = event
                    .trim_end_matches('\n')
                    .split('\n')
                    .filter(|line| !line.starts_with(':'))
                    .collect();
                if lines.is_empty() {
                    continue;
                }
                assert_eq!(lines.len(), 1, "one data line per event: {event:?}");
                let data = lines[0]
                    .strip_prefix("data: ")
                    .unwrap_or_else(|| panic!("not a data line: {event:?}"));
                let reply: Value = serde_json::from_str(data).unwrap();
                check_envelope(&reply);
                return Some(reply);
            }
            let frame = timeout(STEP, self.body.frame())
                .await
                .expect("no stream data in time");
            match frame {
                None => return None,
                Some(frame) => {
                    if let Ok(data) = frame.unwrap().into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// The reply to `req_id`, in whatever order replies come.
    async fn reply(&mut self, req_id: &str) -> Value {
        loop {
            if let Some(reply) = self.replies.remove(req_id) {
                return reply;
            }
            let reply = self
                .next()
                .await
                .unwrap_or_else(|| panic!("the stream ended before the reply to {req_id}"));
            let key = reply["req_id"].as_str().unwrap().to_owned();
            let earlier = self.replies.insert(key.clone(), reply);
            assert!(earlier.is_none(), "two replies to {key}");
        }
    }

    /// The server ends the stream with nothing left unread.
    async fn ends(&mut self) {
        assert!(self.replies.is_empty(), "{:?}", self.replies);
        if let Some(reply) = self.next().await {
            panic!("expected the end of the stream, got {reply}");
        }
    }
}

/// `planning/task/update` of `task` on the objective board `plan` to `status`.
fn task_update(id: &str, plan: &str, task: &str, status: &str) -> String {
    json!({
        "type": "planning/task/update", "id": id, "version": "1.0", "ts": 1_764_460_807.0,
        "plan_id": plan, "task_id": task, "status": status, "assignee": "", "deps": [],
    })
    .to_string()
}

/// `planning/task/list` of the board `plan`.
fn task_list(id: &str, plan: &str) -> String {
    json!({
        "type": "planning/task/list", "id": id, "version": "1.0", "ts": 1_764_460_808.0,
        "plan_id": plan, "status": "",
    })
    .to_string()
}

/// The tasks on the board `plan` as `client` reads them.
async fn tasks(client: &mut Client<'_>, id: &str, plan: &str) -> Vec<Value> {
    let listed = client.ask(&task_list(id, plan), id).await;
    assert_eq!(listed["type"], "planning/task/list/resp", "{listed}");
    listed["tasks"].as_array().unwrap().clone()
}

/// T2, T3: a session made without a header and bound by its handshake to sam's token acts as
/// sam: it moves sam's own running task on the objective's board by the rules, and moving
/// sue's task is refused by T3, changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_session_bound_by_its_handshake_token_moves_its_own_task_and_not_anothers() {
    let (app, gather) = objective_with_sams_gather().await;
    let plan = gather["objective"].as_str().unwrap().to_owned();
    let own = gather["task"]["identity"].as_str().unwrap().to_owned();

    // sue's task as the owner reads it (sam's board shows only sam's tasks, issue 17).
    let sues = |page: &Value| {
        page["items"][0]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["assignee"] == "sue")
            .unwrap_or_else(|| panic!("no task of sue's: {page}"))
            .clone()
    };
    let plans = format!("/v1/rooms/local/objectives/{plan}/plans");
    let sue_task = sues(&app.get("olive", &plans).await);
    let theirs = sue_task["identity"].as_str().unwrap().to_owned();
    let before = sue_task["state"].clone();

    let mut sam = Client::bare(&app).await;
    sam.binds("a1", app.token("sam")).await;
    let board = tasks(&mut sam, "l1", &plan).await;
    assert!(
        board.iter().all(|t| t["assignee"] == "sam"),
        "sam's board holds only sam's tasks: {board:?}"
    );

    let moved = sam
        .ask(&task_update("u1", &plan, &own, "in_progress"), "u1")
        .await;
    assert_eq!(moved["type"], "planning/task/update/resp", "{moved}");
    assert_eq!(moved["success"], true, "sam's own task: {moved}");
    assert_eq!(moved["task_id"], own.as_str(), "{moved}");

    let other = sam
        .ask(&task_update("u2", &plan, &theirs, "in_progress"), "u2")
        .await;
    assert_eq!(other["type"], "planning/task/update/resp", "{other}");
    assert_eq!(other["success"], false, "sam moved sue's task: {other}");
    assert!(
        other["message"].as_str().unwrap().starts_with("T3:"),
        "{other}"
    );

    let after = tasks(&mut sam, "l2", &plan).await;
    let status = |id: &str| {
        after
            .iter()
            .find(|t| t["task_id"] == id)
            .unwrap_or_else(|| panic!("{id} left the board: {after:?}"))["status"]
            .clone()
    };
    assert_eq!(status(&own), "in_progress", "{after:?}");
    let now = sues(&app.get("olive", &plans).await);
    assert_eq!(now["state"], before, "sue's task did not move: {now}");
}

/// T3: until its handshake binds it, a session made without a header answers every message —
/// planning requests, ping, unknown types, replies, malformed JSON, the protocol's own
/// handshake line with its empty `auth_token` — with `unauthorized` and applies none of
/// them; after the handshake it answers as usual, and what was refused was not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_an_unbound_session_answers_unauthorized_until_its_handshake_binds_it() {
    let app = spawn_app().await;
    let before = app.snapshot().await;
    let mut client = Client::bare(&app).await;
    for (line, req_id) in [
        (PLAN_CREATE, "a4"),
        (TASK_ADD, "a2"),
        (PLAN_LIST, "a5"),
        (PING, "a6"),
        (PLAN_DELETE, "a3"),
        (PONG, "a7"),
        ("{not json", ""),
        (&handshake("h0", ""), "h0"),
    ] {
        client.refused(line, req_id).await;
    }
    client.binds("h1", app.token("sam")).await;
    let listed = client.ask(PLAN_LIST, "a5").await;
    assert_eq!(listed["type"], "planning/plan/list/resp", "{listed}");
    let plans = listed["plans"].as_array().unwrap();
    assert!(
        plans.iter().all(|p| p["name"] != "release"),
        "a refused plan/create was stored: {listed}"
    );
    let pong = client.ask(PING, "a6").await;
    assert_eq!(pong["type"], "pong", "{pong}");
    assert_eq!(app.snapshot().await, before, "the room changed");
}

/// T3: a handshake whose `auth_token` is empty, malformed, unknown, revoked, expired, of
/// another Room, or of a principal without `planning.use` is `unauthorized` naming the
/// field; the session stays unbound (its next message is refused too) and nothing changed.
/// A good token still binds it afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_bad_handshake_tokens_are_unauthorized_and_change_nothing() {
    let app = spawn_app().await;
    let before = app.snapshot().await;
    let (revoked, revoked_text) = issue(&app.store, &local(), "sam", None).await;
    app.store
        .revoke_token(&revoked.id, SystemClock.now())
        .await
        .unwrap();
    let (_, expired) = issue(&app.store, &local(), "sam", Some(SystemClock.now())).await;
    let other = agentroom_domain::ids::RoomId::parse("other").unwrap();
    let (_, foreign) = issue(&app.store, &other, "sam", None).await;
    let unknown = format!("ar_{}_{}", "0".repeat(16), "1".repeat(64));
    let mut client = Client::bare(&app).await;
    for (n, token) in [
        "",
        "   ",
        "not-a-token",
        &unknown,
        &revoked_text,
        &expired,
        &foreign,
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("h{n}");
        let reply = client.refused(&handshake(&id, token), &id).await;
        assert_eq!(reply["detail"]["field"], "auth_token", "{token:?}: {reply}");
        client.refused(PING, "a6").await;
    }
    let nora = client
        .refused(&handshake("hn", app.token("nora")), "hn")
        .await;
    assert_eq!(nora["detail"]["permission"], "planning.use", "{nora}");
    client.refused(PLAN_CREATE, "a4").await;
    assert_eq!(app.snapshot().await, before, "the room changed");
    client.binds("ok", app.token("sam")).await;
    let listed = client.ask(PLAN_LIST, "a5").await;
    assert_eq!(listed["plans"], json!([]), "{listed}");
}

/// T3: a session never changes identity. Made with sam's bearer header, a handshake with
/// sue's token is `unauthorized` (an empty `auth_token` or sam's own is fine); bound by its
/// handshake to sam, a second handshake with sue's token is refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_handshake_naming_another_principal_than_the_sessions_is_unauthorized() {
    let app = spawn_app().await;
    let mut header = Client::with_header(&app, "sam").await;
    let reply = header
        .refused(&handshake("h1", app.token("sue")), "h1")
        .await;
    assert_eq!(reply["detail"]["field"], "auth_token", "{reply}");
    header
        .refused(&handshake("h2", "ar_not-a-token"), "h2")
        .await;
    header.binds("h3", "").await;
    header.binds("h4", app.token("sam")).await;
    // A second token of sam's names the same principal.
    let (_, again) = issue(&app.store, &local(), "sam", None).await;
    header.binds("h5", &again).await;

    let mut bound = Client::bare(&app).await;
    bound.binds("b1", app.token("sam")).await;
    bound
        .refused(&handshake("b2", app.token("sue")), "b2")
        .await;
    bound.binds("b3", "").await;
    let pong = bound.ask(PING, "a6").await;
    assert_eq!(pong["type"], "pong", "{pong}");
}

/// A session made without a header is reached without one, and only within its Room's
/// rules: `shutdown` ends an unbound session (no reply, the stream ends); an unbound session
/// that never binds expires like any idle one; unbound sessions fill at most half of the
/// session bound, so sessions with tokens still get made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbound_sessions_end_expire_and_never_crowd_out_token_holders() {
    let app = spawn_app_configured(&[], |config| {
        config.max_sessions = 4;
        config.session_idle_timeout = Duration::from_secs(2);
    })
    .await;
    let mut ended = Client::bare(&app).await;
    let sent = ended
        .post(r#"{"type":"shutdown","id":"s1","version":"1.0","ts":1764460800.0,"timeout":10}"#)
        .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{sent:?}");
    ended.stream.ends().await;
    let gone = ended.post(PING).await;
    gone.assert_error(StatusCode::NOT_FOUND, "unknown_session");

    let first = app.call(Method::POST, "/session", &[], "").await;
    assert_eq!(first.status, StatusCode::OK, "{first:?}");
    let second = app.call(Method::POST, "/session", &[], "").await;
    assert_eq!(second.status, StatusCode::OK, "{second:?}");
    let third = app.call(Method::POST, "/session", &[], "").await;
    third.assert_error(StatusCode::SERVICE_UNAVAILABLE, "too_many_sessions");
    let sam = app.as_("sam", Method::POST, "/session", "").await;
    assert_eq!(sam.status, StatusCode::OK, "{sam:?}");

    let idle = first.json()["session_id"].as_str().unwrap().to_owned();
    sleep(Duration::from_secs(4)).await;
    let expired = app
        .call(Method::POST, "/send", &[("x-session-id", &idle)], PING)
        .await;
    expired.assert_error(StatusCode::NOT_FOUND, "unknown_session");
    let again = app.call(Method::POST, "/session", &[], "").await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
}
