//! End-to-end tests of the HTTP edge: the real server on `127.0.0.1:0`, spoken to over HTTP/1.1
//! the way the A2E SDK's `HTTPTransport` speaks (`POST /session`, `POST /send` with a
//! `text/plain` body, `GET /stream` read as Server-Sent Events, replies matched by `req_id`),
//! plus `POST /v1/planning`. Every reply is checked with the conformance suite's
//! `check_envelope` (what the SDK client accepts). Every network wait has a timeout, so a hang
//! fails the test instead of blocking CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentroom_planning::conformance::check_envelope;
use agentroom_planning::limits::MAX_MESSAGE_BYTES;
use agentroom_planning::{
    Ambient, NewPlan, NewTask, NoRandomness, PlanRecord, PlanningRepository, PlanningService,
    Refusal, RepoError, RoomId, SystemAmbient, TaskChange, TaskDetail, TaskRows, Timestamp,
};
use agentroom_server::{ServerConfig, router, serve};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// How long any one network step may take before the test fails.
const STEP: Duration = Duration::from_secs(10);

/// The planning store the server runs on. One line to swap for the SQLite store.
/// The real embedded store, on a fresh migrated file per server.
fn repository() -> Arc<dyn PlanningRepository> {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("planning.db");
    agentroom_store_sqlite::migrate::up(&path).unwrap();
    Arc::new(
        agentroom_store_sqlite::SqlitePlanning::open(
            &path,
            agentroom_store_sqlite::Durability::ProcessCrash,
        )
        .unwrap(),
    )
}

fn local() -> ServerConfig {
    ServerConfig::new(RoomId::parse("local").unwrap())
}

/// A running server and a client for it.
struct TestApp {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<std::io::Result<()>>>,
}

/// Starts the real server on a free port with a fresh store (`spawn_app`).
async fn spawn_app(config: ServerConfig) -> TestApp {
    spawn_app_over(repository(), config).await
}

async fn spawn_app_over(repository: Arc<dyn PlanningRepository>, config: ServerConfig) -> TestApp {
    spawn_app_with(repository, Arc::new(SystemAmbient), config).await
}

async fn spawn_app_with(
    repository: Arc<dyn PlanningRepository>,
    ambient: Arc<dyn Ambient>,
    config: ServerConfig,
) -> TestApp {
    let service = Arc::new(PlanningService::new(repository, ambient));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let app = router(service, config);
    let server = tokio::spawn(serve(listener, app, async move {
        let _ = stopped.await;
    }));
    TestApp {
        base: format!("http://{address}"),
        client: Client::builder(TokioExecutor::new()).build_http(),
        stop: Some(stop),
        server: Some(server),
    }
}

/// A finished HTTP response.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// An error of the HTTP edge: the status, JSON, and `{"error": code, "message": ..}`.
    fn assert_error(&self, status: StatusCode, code: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.headers["content-type"], "application/json", "{self:?}");
        let body = self.json();
        assert_eq!(body["error"], code, "{body}");
        assert!(body["message"].is_string(), "{body}");
    }
}

impl TestApp {
    async fn call(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).unwrap();
        let response = timeout(STEP, self.client.request(request))
            .await
            .expect("no response in time")
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = timeout(STEP, response.into_body().collect())
            .await
            .expect("no body in time")
            .unwrap()
            .to_bytes();
        Answer {
            status,
            headers,
            body: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    /// `POST /session`, as the SDK does it (no body).
    async fn session(&self) -> String {
        let answer = self.call(Method::POST, "/session", &[], "").await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let id = answer.json()["session_id"].as_str().unwrap().to_owned();
        assert!(!id.is_empty());
        id
    }

    /// `POST /send` with the SDK's headers.
    async fn send(&self, session: &str, message: impl Into<Bytes>) -> Answer {
        self.call(
            Method::POST,
            "/send",
            &[
                ("content-type", "text/plain"),
                ("accept", "text/event-stream"),
                ("x-session-id", session),
                ("authorization", "Bearer ignored-for-now"),
            ],
            message,
        )
        .await
    }

    /// `POST /send` that must be accepted.
    async fn accepted(&self, session: &str, message: &Value) {
        let answer = self.send(session, message.to_string()).await;
        assert!(answer.status.is_success(), "{answer:?}");
        assert_eq!(answer.json(), json!({"ok": true}));
    }

    /// `GET /stream`, connected.
    async fn stream(&self, session: &str) -> Events {
        let request = Request::builder()
            .method(Method::GET)
            .uri(format!("{}/stream", self.base))
            .header("accept", "text/event-stream")
            .header("x-session-id", session)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = timeout(STEP, self.client.request(request))
            .await
            .expect("stream did not connect in time")
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events {
            body: response.into_body(),
            buffer: Vec::new(),
            replies: HashMap::new(),
        }
    }

    /// `POST /v1/planning`.
    async fn planning(&self, message: impl Into<Bytes>) -> Answer {
        self.call(
            Method::POST,
            "/v1/planning",
            &[("content-type", "application/json")],
            message,
        )
        .await
    }

    /// `POST /v1/planning` that must answer 200 with an SDK-acceptable reply.
    async fn ask(&self, message: &Value) -> Value {
        let answer = self.planning(message.to_string()).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.headers["content-type"], "application/json");
        let reply = answer.json();
        check_envelope(&reply);
        reply
    }

    /// Stops the server and checks that it returns in time (open streams must not hold it).
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            timeout(STEP, server)
                .await
                .expect("the server did not stop in time")
                .unwrap()
                .unwrap();
        }
    }
}

/// A connected `/stream`, read as the SDK reads it, strictly: each event is exactly one
/// `data: <json>` line and a blank line; comment-only events (keep-alives) are skipped.
struct Events {
    body: Incoming,
    buffer: Vec<u8>,
    /// Replies read while waiting for another `req_id`.
    replies: HashMap<String, Value>,
}

impl Events {
    /// The next message, or `None` when the server ended the stream.
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
                let reply: Value = serde_json::from_str(data)
                    .unwrap_or_else(|e| panic!("data is not JSON ({e}): {data}"));
                check_envelope(&reply);
                return Some(reply);
            }
            let frame = timeout(STEP, self.body.frame())
                .await
                .expect("no stream data in time");
            match frame {
                None => {
                    assert!(self.buffer.is_empty(), "stream ended mid-event");
                    return None;
                }
                Some(frame) => {
                    if let Ok(data) = frame.unwrap().into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// The reply to `req_id`, in whatever order replies come (the SDK matches by `req_id`).
    async fn reply(&mut self, req_id: &str) -> Value {
        loop {
            if let Some(reply) = self.replies.remove(req_id) {
                return reply;
            }
            let reply = self
                .next()
                .await
                .unwrap_or_else(|| panic!("stream ended before the reply to {req_id}"));
            let key = reply["req_id"].as_str().unwrap().to_owned();
            let earlier = self.replies.insert(key.clone(), reply);
            assert!(earlier.is_none(), "two replies to {key}");
        }
    }

    /// The server ends the stream, with no message left unread.
    async fn ends(&mut self) {
        assert!(self.replies.is_empty(), "{:?}", self.replies);
        if let Some(reply) = self.next().await {
            panic!("expected the end of the stream, got {reply}");
        }
    }
}

/// An SDK-style message: every field PlanningAPI sends, a 32-hex id and a float `ts`.
fn message(kind: &str, id: &str, fields: Value) -> Value {
    let mut message = json!({"type": kind, "id": id, "version": "1.0", "ts": 1_764_460_800.5});
    for (key, value) in fields.as_object().unwrap() {
        message[key] = value.clone();
    }
    message
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
        .to_owned()
}

// The exact lines of A2E-PROTOCOL.md's "Example lines".
const HANDSHAKE: &str = r#"{"type":"handshake/req","id":"a1","version":"1.0","ts":1764460800.0,"agent_id":"ag","agent_caps":["planning"],"auth_token":""}"#;
const TASK_ADD: &str = r#"{"type":"planning/task/add","id":"a2","version":"1.0","ts":1764460801.0,"plan_id":"p1","title":"write spec","status":"todo","description":"","assignee":"","deps":[],"metadata":{}}"#;
const PLAN_DELETE: &str =
    r#"{"type":"planning/plan/delete","id":"a3","version":"1.0","ts":1764460802.0}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_ok() {
    let app = spawn_app(local()).await;
    let answer = app.call(Method::GET, "/health", &[], "").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json(), json!({"status": "ok"}));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_example_lines_are_answered_on_the_stream() {
    let app = spawn_app(local()).await;
    let session = app.session().await;
    // All three before the stream connects: output is buffered from the session's start.
    for line in [HANDSHAKE, TASK_ADD, PLAN_DELETE] {
        let answer = app.send(&session, line).await;
        assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
        assert_eq!(answer.json(), json!({"ok": true}));
    }
    let mut events = app.stream(&session).await;

    let handshake = events.reply("a1").await;
    assert_eq!(handshake["type"], "handshake/resp");
    assert_eq!(handshake["ok"], true);
    assert_eq!(handshake["session_id"], session.as_str());
    assert_eq!(
        handshake["accepted_caps"],
        json!([{"capability": "planning", "enabled": true, "metadata": {}}])
    );
    assert_eq!(handshake["max_parallel"], 4);

    // p1 does not exist in a fresh store: refused with the normal reply type.
    let add = events.reply("a2").await;
    assert_eq!(add["type"], "planning/task/add/resp");
    assert_eq!(add["success"], false);
    assert_eq!(add["code"], "unknown_plan");

    let unknown = events.reply("a3").await;
    assert_eq!(unknown["type"], "error");
    assert_eq!(unknown["code"], "invalid_message");
    assert_eq!(unknown["message"], "unknown type planning/plan/delete");
    assert!(unknown["detail"].is_object(), "{unknown}");
    assert_eq!(unknown["retryable"], false);
    assert_eq!(unknown["capability_name"], "planning");
    app.stop().await;
}

/// The SDK client's whole flow: handshake before the stream, the six planning messages,
/// ping, shutdown; the stream ends after shutdown and the session is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_client_flow_works_over_http() {
    let app = spawn_app(local()).await;
    let session = app.session().await;
    let hello = message(
        "handshake/req",
        "0a0b0c0d0e0f40a1b2c3d4e5f6a7b8c9",
        json!({"agent_id": "sdk-agent", "agent_caps": ["streaming", "artifacts"], "auth_token": ""}),
    );
    app.accepted(&session, &hello).await;
    let mut events = app.stream(&session).await;
    let reply = events.reply("0a0b0c0d0e0f40a1b2c3d4e5f6a7b8c9").await;
    assert_eq!(reply["type"], "handshake/resp");
    assert_eq!(reply["ok"], true);
    assert_eq!(reply["accepted_caps"], json!([]));

    // Extra fields are tolerated, as the SDK sends some.
    let create = message(
        "planning/plan/create",
        "c1",
        json!({"name": "release", "columns": [], "description": "ship it", "extra": {"x": 1}}),
    );
    app.accepted(&session, &create).await;
    let created = events.reply("c1").await;
    assert_eq!(created["type"], "planning/plan/create/resp");
    assert_eq!(created["success"], true);
    assert_eq!(
        created["columns"],
        json!(["backlog", "todo", "in_progress", "done"])
    );
    let plan = text(&created["plan_id"]);

    let add = |id: &str, title: &str, status: &str, deps: Vec<String>| {
        message(
            "planning/task/add",
            id,
            json!({"plan_id": plan, "title": title, "status": status, "description": "",
                   "assignee": "", "deps": deps, "metadata": {}}),
        )
    };
    app.accepted(&session, &add("t1", "write spec", "backlog", vec![]))
        .await;
    let first = events.reply("t1").await;
    assert_eq!(first["type"], "planning/task/add/resp");
    assert_eq!(first["success"], true);
    assert_eq!(first["status"], "backlog");
    let spec = text(&first["task_id"]);
    app.accepted(
        &session,
        &add("t2", "review spec", "todo", vec![spec.clone()]),
    )
    .await;
    let second = events.reply("t2").await;
    assert_eq!(second["success"], true);
    let review = text(&second["task_id"]);

    let update = message(
        "planning/task/update",
        "u1",
        json!({"plan_id": plan, "task_id": spec, "status": "done", "assignee": "ana", "deps": []}),
    );
    app.accepted(&session, &update).await;
    let updated = events.reply("u1").await;
    assert_eq!(updated["type"], "planning/task/update/resp");
    assert_eq!(updated["success"], true);
    assert_eq!(updated["task_id"], spec.as_str());

    let list = message(
        "planning/task/list",
        "l1",
        json!({"plan_id": plan, "status": ""}),
    );
    app.accepted(&session, &list).await;
    let listed = events.reply("l1").await;
    assert_eq!(listed["type"], "planning/task/list/resp");
    assert_eq!(listed["success"], true);
    let ids: Vec<String> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| text(&t["task_id"]))
        .collect();
    assert_eq!(ids, vec![spec.clone(), review.clone()]);

    let board = message("planning/plan/board", "b1", json!({"plan_id": plan}));
    app.accepted(&session, &board).await;
    let boards = events.reply("b1").await;
    assert_eq!(boards["type"], "planning/plan/board/resp");
    let board = &boards["boards"][0];
    assert_eq!(board["plan_id"], plan.as_str());
    assert_eq!(board["tasks"]["done"][0]["task_id"], spec.as_str());
    assert_eq!(board["tasks"]["done"][0]["assignee"], "ana");
    assert_eq!(board["tasks"]["todo"][0]["task_id"], review.as_str());
    assert_eq!(board["tasks"]["backlog"], json!([]));

    app.accepted(&session, &message("planning/plan/list", "pl", json!({})))
        .await;
    let plans = events.reply("pl").await;
    assert_eq!(plans["type"], "planning/plan/list/resp");
    assert_eq!(plans["plans"][0]["plan_id"], plan.as_str());
    assert_eq!(plans["plans"][0]["name"], "release");

    app.accepted(&session, &message("ping", "ping1", json!({})))
        .await;
    let pong = events.reply("ping1").await;
    assert_eq!(pong["type"], "pong");
    assert!(pong["uptime_seconds"].is_number());

    app.accepted(
        &session,
        &message("shutdown", "bye", json!({"timeout": 10})),
    )
    .await;
    events.ends().await;
    app.send(&session, message("ping", "late", json!({})).to_string())
        .await
        .assert_error(StatusCode::NOT_FOUND, "unknown_session");
    let again = app
        .call(Method::GET, "/stream", &[("x-session-id", &session)], "")
        .await;
    again.assert_error(StatusCode::NOT_FOUND, "unknown_session");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_session_header_is_400_and_an_unknown_one_404() {
    let app = spawn_app(local()).await;
    let ping = message("ping", "p", json!({})).to_string();
    app.call(Method::POST, "/send", &[], ping.clone())
        .await
        .assert_error(StatusCode::BAD_REQUEST, "missing_session_id");
    app.call(Method::POST, "/send", &[("x-session-id", "")], ping.clone())
        .await
        .assert_error(StatusCode::BAD_REQUEST, "missing_session_id");
    app.send("0123456789abcdef0123456789abcdef", ping)
        .await
        .assert_error(StatusCode::NOT_FOUND, "unknown_session");
    app.call(Method::GET, "/stream", &[], "")
        .await
        .assert_error(StatusCode::BAD_REQUEST, "missing_session_id");
    app.call(Method::GET, "/stream", &[("x-session-id", "nope")], "")
        .await
        .assert_error(StatusCode::NOT_FOUND, "unknown_session");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_paths_are_404_and_other_methods_405_in_json() {
    let app = spawn_app(local()).await;
    app.call(Method::GET, "/nope", &[], "")
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.call(Method::POST, "/v1/planning/extra", &[], "{}")
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.call(Method::GET, "/send", &[], "")
        .await
        .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    app.call(Method::GET, "/v1/planning", &[], "")
        .await
        .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    app.stop().await;
}

/// A full session buffer refuses the message whole with 429; reading the stream frees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_session_buffer_answers_429_and_processes_nothing() {
    let config = ServerConfig {
        session_buffer: 3,
        ..local()
    };
    let app = spawn_app(config).await;
    let session = app.session().await;
    for n in 1..=3 {
        app.accepted(&session, &message("ping", &format!("p{n}"), json!({})))
            .await;
    }
    let full = app
        .send(&session, message("ping", "p4", json!({})).to_string())
        .await;
    full.assert_error(StatusCode::TOO_MANY_REQUESTS, "session_buffer_full");
    assert_eq!(full.headers["retry-after"], "1");
    // Nothing of the refused message reaches the store either.
    let create = message("planning/plan/create", "c", json!({"name": "refused"}));
    app.send(&session, create.to_string())
        .await
        .assert_error(StatusCode::TOO_MANY_REQUESTS, "session_buffer_full");

    let mut events = app.stream(&session).await;
    for n in 1..=3 {
        assert_eq!(events.next().await.unwrap()["req_id"], format!("p{n}"));
    }
    app.accepted(&session, &message("ping", "p5", json!({})))
        .await;
    assert_eq!(events.reply("p5").await["type"], "pong");
    let plans = app
        .ask(&message("planning/plan/list", "l", json!({})))
        .await;
    assert_eq!(plans["plans"], json!([]));
    app.stop().await;
}

/// Idle sessions expire; a connected stream or regular sends keep a session alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire_and_used_ones_do_not() {
    let config = ServerConfig {
        session_idle_timeout: Duration::from_millis(500),
        ..local()
    };
    let app = spawn_app(config).await;
    let idle = app.session().await;
    let streaming = app.session().await;
    let sending = app.session().await;
    let mut events = app.stream(&streaming).await;
    // 1.2 s in all: the idle session is past its timeout and a sweep (every 125 ms) has run.
    for n in 0..12 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        app.accepted(&sending, &message("ping", &format!("s{n}"), json!({})))
            .await;
    }
    app.send(&idle, message("ping", "i", json!({})).to_string())
        .await
        .assert_error(StatusCode::NOT_FOUND, "unknown_session");
    app.accepted(&streaming, &message("ping", "alive", json!({})))
        .await;
    assert_eq!(events.reply("alive").await["type"], "pong");
    // The sending session's replies were kept for it all along.
    let mut sent = app.stream(&sending).await;
    for n in 0..12 {
        assert_eq!(sent.reply(&format!("s{n}")).await["type"], "pong");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_bound_answers_503() {
    let config = ServerConfig {
        max_sessions: 2,
        ..local()
    };
    let app = spawn_app(config).await;
    let first = app.session().await;
    let _second = app.session().await;
    let third = app.call(Method::POST, "/session", &[], "").await;
    third.assert_error(StatusCode::SERVICE_UNAVAILABLE, "too_many_sessions");
    // A shutdown frees its place.
    app.accepted(&first, &message("shutdown", "bye", json!({})))
        .await;
    let mut freed = false;
    for _ in 0..100 {
        let answer = app.call(Method::POST, "/session", &[], "").await;
        if answer.status == StatusCode::OK {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(freed, "the shut down session still counts");
    app.stop().await;
}

/// A newer stream replaces the older; what is produced with no stream connected waits for
/// the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_resumes_with_what_was_not_delivered() {
    let app = spawn_app(local()).await;
    let session = app.session().await;
    let mut first = app.stream(&session).await;
    app.accepted(&session, &message("ping", "p1", json!({})))
        .await;
    assert_eq!(first.reply("p1").await["type"], "pong");

    let mut second = app.stream(&session).await;
    first.ends().await;
    app.accepted(&session, &message("ping", "p2", json!({})))
        .await;
    assert_eq!(second.reply("p2").await["type"], "pong");

    // The client goes away; the server notices the closed connection.
    drop(second);
    tokio::time::sleep(Duration::from_millis(500)).await;
    for n in 3..=5 {
        app.accepted(&session, &message("ping", &format!("p{n}"), json!({})))
            .await;
    }
    let mut third = app.stream(&session).await;
    for n in 3..=5 {
        assert_eq!(third.next().await.unwrap()["req_id"], format!("p{n}"));
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_only_its_own_session() {
    let app = spawn_app(local()).await;
    let leaving = app.session().await;
    let staying = app.session().await;
    let mut leaving_events = app.stream(&leaving).await;
    let mut staying_events = app.stream(&staying).await;
    app.accepted(&leaving, &message("ping", "last", json!({})))
        .await;
    app.accepted(
        &leaving,
        &message("shutdown", "bye", json!({"timeout": 10})),
    )
    .await;
    // Replies queued before the shutdown are still delivered; then the stream ends.
    assert_eq!(leaving_events.reply("last").await["type"], "pong");
    leaving_events.ends().await;
    app.accepted(&staying, &message("ping", "still", json!({})))
        .await;
    assert_eq!(staying_events.reply("still").await["type"], "pong");
    app.stop().await;
}

/// A body above the message limit: 413, nothing processed, the A2E error on the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_above_the_limit_is_413_with_the_error_on_the_stream() {
    let app = spawn_app(local()).await;
    let session = app.session().await;
    let title = "x".repeat(MAX_MESSAGE_BYTES);
    let huge = message("planning/plan/create", "big", json!({"name": title})).to_string();
    app.send(&session, huge.clone())
        .await
        .assert_error(StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    // Answered with the message's own id as its req_id (issue 17: with `""` the SDK's call
    // never completed), read from the beginning of the message.
    let mut events = app.stream(&session).await;
    let error = events.reply("big").await;
    assert_eq!(error["type"], "error");
    assert_eq!(error["code"], "schema_violation");
    assert_eq!(error["detail"]["limit_bytes"], MAX_MESSAGE_BYTES);

    let answer = app.planning(huge).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    let error = answer.json();
    check_envelope(&error);
    assert_eq!(error["code"], "schema_violation");
    assert_eq!(error["req_id"], "big");

    // Exactly at the limit is read (and answered: here a title above its own limit).
    let mut at_limit = message("planning/plan/create", "edge", json!({"name": ""})).to_string();
    let pad = MAX_MESSAGE_BYTES - at_limit.len();
    at_limit = at_limit.replacen(
        r#""name":"""#,
        &format!(r#""name":"{}""#, "y".repeat(pad)),
        1,
    );
    assert_eq!(at_limit.len(), MAX_MESSAGE_BYTES);
    let reply = app.ask(&serde_json::from_str(&at_limit).unwrap()).await;
    assert_eq!(reply["req_id"], "edge");
    let plans = app
        .ask(&message("planning/plan/list", "l", json!({})))
        .await;
    assert_eq!(plans["plans"], json!([]));
    app.stop().await;
}

/// A chunked body (no `Content-Length`) is cut off as soon as it passes the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_above_the_limit_is_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn_app(local()).await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut socket = timeout(STEP, tokio::net::TcpStream::connect(&address))
        .await
        .unwrap()
        .unwrap();
    let chunk = vec![b' '; MAX_MESSAGE_BYTES + 1];
    let head = format!(
        "POST /v1/planning HTTP/1.1\r\nhost: {address}\r\ntransfer-encoding: chunked\r\n\
         connection: close\r\n\r\n{:x}\r\n",
        chunk.len()
    );
    timeout(STEP, async {
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(&chunk).await?;
        socket.write_all(b"\r\n0\r\n\r\n").await
    })
    .await
    .unwrap()
    .ok(); // the server may answer and close before it has read everything
    let mut response = Vec::new();
    timeout(STEP, socket.read_to_end(&mut response))
        .await
        .unwrap()
        .ok();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("schema_violation"), "{response}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_planning_answers_one_message_with_its_reply() {
    let app = spawn_app(local()).await;
    let created = app
        .ask(&message(
            "planning/plan/create",
            "c",
            json!({"name": "rest", "columns": ["todo", "done"], "unknown_field": true}),
        ))
        .await;
    assert_eq!(created["type"], "planning/plan/create/resp");
    assert_eq!(created["req_id"], "c");
    assert_eq!(created["success"], true);
    let plan = text(&created["plan_id"]);
    // `backlog`, the default, lands in the first column.
    let added = app
        .ask(&json!({"type": "planning/task/add", "id": "a", "plan_id": plan, "title": "t"}))
        .await;
    assert_eq!(added["success"], true);
    assert_eq!(added["status"], "todo");
    let refused = app
        .ask(
            &json!({"type": "planning/task/add", "id": "r", "plan_id": plan, "title": "t",
                     "status": "doing"}),
        )
        .await;
    assert_eq!(refused["success"], false);
    assert_eq!(refused["code"], "unknown_status");

    let malformed = app.planning("{not json").await;
    assert_eq!(malformed.status, StatusCode::OK);
    let error = malformed.json();
    check_envelope(&error);
    assert_eq!(error["type"], "error");
    assert_eq!(error["code"], "parse_error");
    assert_eq!(error["req_id"], "");
    let not_object = app.planning("[1, 2]").await.json();
    assert_eq!(not_object["code"], "parse_error");
    let missing = app
        .ask(&json!({"type": "planning/task/add", "id": "m", "plan_id": plan}))
        .await;
    assert_eq!(missing["code"], "schema_violation");
    assert_eq!(missing["detail"]["field"], "title");
    let unknown = app
        .ask(&json!({"type": "planning/plan/delete", "id": "d"}))
        .await;
    assert_eq!(unknown["code"], "invalid_message");
    let pong = app.ask(&json!({"type": "ping", "id": "p"})).await;
    assert_eq!(pong["type"], "pong");

    for silent in [
        json!({"type": "pong", "id": "x"}),
        json!({"type": "shutdown", "id": "s", "timeout": 10}),
    ] {
        let answer = app.planning(silent.to_string()).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
        assert_eq!(answer.body, "");
    }
    // A shutdown through /v1/planning ends only its own request.
    let board = app
        .ask(&json!({"type": "planning/plan/board", "id": "b", "plan_id": plan}))
        .await;
    assert_eq!(board["boards"][0]["tasks"]["todo"][0]["title"], "t");
    app.stop().await;
}

/// Many sessions adding tasks to one plan at once, several sends in flight per session:
/// every acknowledged task is on the board, each exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_lose_no_task() {
    let app = Arc::new(spawn_app(local()).await);
    let plan = text(
        &app.ask(&message(
            "planning/plan/create",
            "c",
            json!({"name": "busy"}),
        ))
        .await["plan_id"],
    );
    let sessions = 8;
    let per_session = 25;
    let mut writers = Vec::new();
    for s in 0..sessions {
        let app = Arc::clone(&app);
        let plan = plan.clone();
        writers.push(tokio::spawn(async move {
            let session = app.session().await;
            let mut events = app.stream(&session).await;
            let sends = (0..per_session).map(|n| {
                let add = message(
                    "planning/task/add",
                    &format!("s{s}-{n}"),
                    json!({"plan_id": plan, "title": format!("s{s}-{n}"), "status": "todo",
                           "description": "", "assignee": "", "deps": [], "metadata": {}}),
                );
                let app = Arc::clone(&app);
                let session = session.clone();
                async move { app.accepted(&session, &add).await }
            });
            futures_util::future::join_all(sends).await;
            let mut ids = Vec::new();
            for n in 0..per_session {
                let reply = events.reply(&format!("s{s}-{n}")).await;
                assert_eq!(reply["success"], true, "{reply}");
                ids.push(text(&reply["task_id"]));
            }
            ids
        }));
    }
    let mut expected = Vec::new();
    for writer in writers {
        expected.extend(timeout(STEP * 3, writer).await.unwrap().unwrap());
    }
    let board = app
        .ask(&message(
            "planning/plan/board",
            "b",
            json!({"plan_id": plan}),
        ))
        .await;
    let mut on_board: Vec<String> = board["boards"][0]["tasks"]["todo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| text(&t["task_id"]))
        .collect();
    assert_eq!(on_board.len(), sessions * per_session);
    on_board.sort();
    expected.sort();
    assert_eq!(on_board, expected);
    Arc::try_unwrap(app)
        .unwrap_or_else(|_| panic!("a writer still holds the app"))
        .stop()
        .await;
}

/// Stopping the server ends open streams, so the graceful shutdown returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_server_ends_open_streams() {
    let app = spawn_app(local()).await;
    let session = app.session().await;
    let mut events = app.stream(&session).await;
    app.accepted(&session, &message("ping", "p", json!({})))
        .await;
    assert_eq!(events.reply("p").await["type"], "pong");
    app.stop().await;
    events.ends().await;
}

/// A store that fails every call, and panics on listing plans (a bug, not a failure).
struct BrokenStore;

/// The failure every call of [`BrokenStore`] gives: a database error with a cause.
fn on_fire() -> RepoError {
    RepoError::database("reading the disk", std::io::Error::other("disk on fire"))
}

#[async_trait::async_trait]
impl PlanningRepository for BrokenStore {
    async fn create_plan(&self, _: &RoomId, _: &NewPlan) -> Result<PlanRecord, RepoError> {
        Err(on_fire())
    }
    async fn plans(&self, _: &RoomId) -> Result<Vec<PlanRecord>, RepoError> {
        panic!("a bug in the store")
    }
    async fn plan(&self, _: &RoomId, _: &str) -> Result<Option<PlanRecord>, RepoError> {
        Err(on_fire())
    }
    async fn add_task(&self, _: &RoomId, _: &NewTask) -> Result<Result<(), Refusal>, RepoError> {
        Err(on_fire())
    }
    async fn update_task(
        &self,
        _: &RoomId,
        _: &TaskChange,
    ) -> Result<Result<(), Refusal>, RepoError> {
        Err(on_fire())
    }
    async fn tasks(&self, _: &RoomId, _: i64, _: Option<usize>) -> Result<TaskRows, RepoError> {
        Err(on_fire())
    }
    async fn task(&self, _: &RoomId, _: i64, _: &str) -> Result<Option<TaskDetail>, RepoError> {
        Err(on_fire())
    }
}

/// A storage failure is an A2E `runtime_error` that says nothing internal; a panic closes
/// only the session it happened in (its id then answers 404), or is a 500 on /v1/planning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_is_a_runtime_error_and_a_panic_ends_only_its_session() {
    let app = spawn_app_over(Arc::new(BrokenStore), local()).await;
    let create = message("planning/plan/create", "c", json!({"name": "p"}));
    let failed = app.ask(&create).await;
    assert_eq!(failed["type"], "error");
    assert_eq!(failed["code"], "runtime_error");
    assert!(!failed.to_string().contains("disk on fire"), "{failed}");

    let unlucky = app.session().await;
    let other = app.session().await;
    let mut events = app.stream(&unlucky).await;
    app.accepted(&unlucky, &create).await;
    assert_eq!(events.reply("c").await["code"], "runtime_error");
    app.accepted(&unlucky, &message("planning/plan/list", "l", json!({})))
        .await;
    events.ends().await;
    app.send(&unlucky, message("ping", "p", json!({})).to_string())
        .await
        .assert_error(StatusCode::NOT_FOUND, "unknown_session");
    let mut others = app.stream(&other).await;
    app.accepted(&other, &message("ping", "p", json!({}))).await;
    assert_eq!(others.reply("p").await["type"], "pong");

    let list = message("planning/plan/list", "l", json!({})).to_string();
    let answer = app.planning(list).await;
    answer.assert_error(StatusCode::INTERNAL_SERVER_ERROR, "internal_error");
    assert!(!answer.body.contains("bug"), "{answer:?}");
    app.stop().await;
}

/// A source of ids with no randomness at all (test-only).
struct NoRandomnessAtAll;

impl Ambient for NoRandomnessAtAll {
    fn fresh_id(&self) -> Result<String, NoRandomness> {
        Err(NoRandomness::new("the generator is broken"))
    }
    fn now(&self) -> Timestamp {
        SystemAmbient.now()
    }
}

/// No randomness, no session: `POST /session` and `POST /v1/planning` answer 503
/// `unavailable` through the one error of the edge, say nothing internal, and store nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_randomness_no_session_is_made_and_nothing_is_stored() {
    let store = repository();
    let app = spawn_app_with(store.clone(), Arc::new(NoRandomnessAtAll), local()).await;
    let created = app.call(Method::POST, "/session", &[], "").await;
    created.assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    assert!(!created.body.contains("generator"), "{created:?}");
    let create = message("planning/plan/create", "c", json!({"name": "p"}));
    app.planning(create.to_string())
        .await
        .assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    let room = RoomId::parse("local").unwrap();
    assert!(store.plans(&room).await.unwrap().is_empty());
    app.stop().await;
}
