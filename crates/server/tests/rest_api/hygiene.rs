//! Issue 17, connection hygiene and the small fixes at the HTTP edge, over real HTTP: slow
//! headers, slow bodies and idle keep-alive connections are closed or answered within their
//! timeouts; idle connections beyond the limit are shed so `/health` answers; A2E sessions
//! and notification streams are per principal and re-check their tokens; the bearer scheme
//! is case-insensitive; a body naming a key twice is refused; an oversized A2E message is
//! answered with its `req_id`.

use std::time::{Duration, Instant};

use agentroom_coordinator::InputId;
use agentroom_domain::engine::MembershipChange;
use agentroom_domain::room::Role;
use agentroom_ports::{Clock, SystemClock, TokenStore};
use agentroom_server::ConnectionLimits;
use axum::http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::support::{App, STEP, issue, local, p, spawn_app, spawn_app_configured, spawn_app_with};

fn limits(header: u64, body: u64, idle: u64, max: usize) -> ConnectionLimits {
    ConnectionLimits {
        header_read_timeout: Duration::from_millis(header),
        body_read_timeout: Duration::from_millis(body),
        idle_timeout: Duration::from_millis(idle),
        max_connections: max,
    }
}

async fn spawn_limited(limits: ConnectionLimits) -> App {
    spawn_app_with(&[], |_| {}, limits, 16).await
}

async fn raw(app: &App) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Reads `stream` until the server closes it (EOF or reset) or `within` passes; returns what
/// was read and when it was closed (`None`: still open).
async fn until_closed(
    stream: &mut tokio::net::tcp::OwnedReadHalf,
    within: Duration,
) -> (String, Option<Duration>) {
    let started = Instant::now();
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = within.saturating_sub(started.elapsed());
        match timeout(left, stream.read(&mut buf)).await {
            Err(_) => return (String::from_utf8_lossy(&text).into_owned(), None),
            Ok(Ok(0) | Err(_)) => {
                return (
                    String::from_utf8_lossy(&text).into_owned(),
                    Some(started.elapsed()),
                );
            }
            Ok(Ok(n)) => text.extend_from_slice(&buf[..n]),
        }
    }
}

/// Writes `bytes` one at a time, `every` apart, until the server closes the connection (or
/// `bytes` runs out).
fn trickle(
    mut writer: tokio::net::tcp::OwnedWriteHalf,
    bytes: Vec<u8>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for byte in bytes {
            tokio::time::sleep(every).await;
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_are_closed_within_the_header_read_timeout() {
    let app = spawn_limited(limits(500, 10_000, 10_000, 64)).await;
    let (mut reader, mut writer) = raw(&app).await.into_split();
    writer
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    // A header byte every 100 ms, for far longer than the timeout.
    let trickling = trickle(writer, b"x-slow: ".repeat(20), Duration::from_millis(100));
    let (text, closed) = until_closed(&mut reader, Duration::from_secs(5)).await;
    let closed = closed.expect("a connection trickling its headers was held for 5 s");
    println!("slow headers: closed after {closed:?} (header-read timeout 500 ms)");
    assert!(closed >= Duration::from_millis(400), "{closed:?}");
    assert!(closed < Duration::from_millis(2_000), "{closed:?}");
    assert!(!text.contains("200 OK"), "{text}");
    trickling.abort();
    // A prompt request on a new connection is served.
    let (mut reader, mut writer) = raw(&app).await.into_split();
    writer
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let (text, _) = until_closed(&mut reader, Duration::from_secs(5)).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_answered_408_within_the_body_read_timeout_and_change_nothing() {
    let app = spawn_limited(limits(10_000, 500, 10_000, 64)).await;
    let before = app.snapshot().await;
    let (mut reader, mut writer) = raw(&app).await.into_split();
    let head = format!(
        "POST /v1/rooms/local/budget/raise HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: 40\r\n\r\n{{",
        app.token("oscar")
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    let trickling = trickle(
        writer,
        br#""amount_micros": 1000000000          }"#.to_vec(),
        Duration::from_millis(100),
    );
    let started = Instant::now();
    let (text, closed) = until_closed(&mut reader, Duration::from_secs(5)).await;
    println!(
        "slow body: answered in {:?} (body-read timeout 500 ms)",
        started.elapsed()
    );
    assert!(closed.is_some(), "a trickled body was held for 5 s: {text}");
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("body_timeout"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    trickling.abort();
    assert_eq!(
        app.snapshot().await,
        before,
        "a timed-out body changed the room"
    );

    // The A2E transport's bodies too: nothing is admitted to the session.
    let auth = format!("Bearer {}", app.token("sam"));
    let created = app
        .call(Method::POST, "/session", &[("authorization", &auth)], "")
        .await;
    let session = created.json()["session_id"].as_str().unwrap().to_owned();
    let (mut reader, mut writer) = raw(&app).await.into_split();
    let head = format!(
        "POST /send HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\nx-session-id: {session}\r\n\
         content-length: 60\r\n\r\n{{\"type\":\"ping\","
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    let trickling = trickle(writer, vec![b' '; 40], Duration::from_millis(100));
    let (text, closed) = until_closed(&mut reader, Duration::from_secs(5)).await;
    assert!(closed.is_some(), "{text}");
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    trickling.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let app = spawn_limited(limits(10_000, 10_000, 500, 64)).await;
    let (mut reader, mut writer) = raw(&app).await.into_split();
    writer
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = timeout(STEP, reader.read(&mut buf)).await.unwrap().unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let (_, closed) = until_closed(&mut reader, Duration::from_secs(5)).await;
    let closed = closed.expect("an idle kept-alive connection was held for 5 s");
    println!("idle keep-alive: closed after {closed:?} (idle timeout 500 ms)");
    assert!(closed < Duration::from_millis(2_000), "{closed:?}");
}

/// Beyond the connection limit, the connections idle the longest are closed for new ones, so
/// a flood of idle connections never keeps `/health` from answering; when every connection
/// has a request in progress (open streams), a new one is answered 503 and closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_beyond_the_limit_are_shed_and_health_answers() {
    let app = spawn_limited(limits(30_000, 30_000, 30_000, 8)).await;
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(raw(&app).await.into_split());
        // Accepted in order, so the oldest are the ones shed.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = Instant::now();
    let (mut reader, mut writer) = raw(&app).await.into_split();
    writer
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let (text, _) = until_closed(&mut reader, Duration::from_secs(5)).await;
    println!(
        "/health with 40 idle connections over a limit of 8: {:?}",
        started.elapsed()
    );
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let mut shed = 0;
    for (reader, _) in &mut idle {
        if until_closed(reader, Duration::from_millis(200))
            .await
            .1
            .is_some()
        {
            shed += 1;
        }
    }
    assert!(shed >= 32, "only {shed} of 40 idle connections were shed");

    // Every connection busy with a stream: a new one is refused with 503, not left waiting.
    let app = spawn_limited(limits(30_000, 30_000, 30_000, 2)).await;
    let auth = format!("Bearer {}", app.token("olive"));
    let mut streams = Vec::new();
    for _ in 0..2 {
        let (reader, mut writer) = raw(&app).await.into_split();
        let request = format!(
            "GET /v1/rooms/local/notifications HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\n\r\n"
        );
        writer.write_all(request.as_bytes()).await.unwrap();
        streams.push((reader, writer));
    }
    for (reader, _) in &mut streams {
        let mut buf = [0u8; 256];
        let n = timeout(STEP, reader.read(&mut buf)).await.unwrap().unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    }
    let (mut reader, _writer) = raw(&app).await.into_split();
    let (text, closed) = until_closed(&mut reader, Duration::from_secs(5)).await;
    assert!(closed.is_some(), "{text}");
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("too_many_connections"), "{text}");
}

/// RFC 9110 11.1: the authentication scheme is case-insensitive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_the_bearer_scheme_is_read_without_regard_to_case() {
    let app = spawn_app().await;
    for scheme in ["bearer", "BEARER", "Bearer", "bEaReR"] {
        let auth = format!("{scheme} {}", app.token("olive"));
        let answer = app
            .call(
                Method::GET,
                "/v1/rooms/local",
                &[("authorization", &auth)],
                "",
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{scheme}: {answer:?}");
    }
    for refused in [
        format!("Basic {}", app.token("olive")),
        format!("Bearer{}", app.token("olive")),
        "bearer ".to_owned(),
    ] {
        app.call(
            Method::GET,
            "/v1/rooms/local",
            &[("authorization", &refused)],
            "",
        )
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
    }
    // The A2E transport reads it the same way.
    let auth = format!("bearer {}", app.token("sam"));
    let created = app
        .call(Method::POST, "/session", &[("authorization", &auth)], "")
        .await;
    assert_eq!(created.status, StatusCode::OK, "{created:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_naming_a_key_twice_is_refused_naming_it_and_changes_nothing() {
    let app = spawn_app().await;
    let before = app.snapshot().await;
    let refused = app
        .as_(
            "oscar",
            Method::POST,
            "/v1/rooms/local/budget/raise",
            r#"{"amount_micros": 1, "amount_micros": 1000000000}"#,
        )
        .await;
    let body = refused.assert_error(StatusCode::BAD_REQUEST, "duplicate_key");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("`amount_micros`"),
        "{body}"
    );
    assert_eq!(app.snapshot().await, before);
    // The same body without the repeat is taken.
    app.post(
        "oscar",
        "/v1/rooms/local/budget/raise",
        r#"{"amount_micros": 1}"#,
    )
    .await;
}

/// A message above the A2E size limit is answered with its own `req_id` when its beginning
/// names one, so the client's call completes; on `POST /v1/rooms/{room}/planning` and on a
/// session's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_a2e_message_is_answered_with_its_req_id() {
    let app = spawn_app().await;
    let pad = "x".repeat(agentroom_planning::limits::MAX_MESSAGE_BYTES);
    let big = envelope("planning/plan/list", "big-1", &pad);
    let answer = app
        .as_("sam", Method::POST, "/v1/rooms/local/planning", &big)
        .await;
    assert_eq!(
        answer.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        &answer.body[..200.min(answer.body.len())]
    );
    let reply = answer.json();
    assert_eq!(reply["req_id"], "big-1", "{reply}");
    assert_eq!(reply["code"], "schema_violation", "{reply}");
    // Without an id in it, the documented empty one.
    let nameless = format!(r#"{{"type":"ping","version":"1.0","pad":"{pad}"}}"#);
    let answer = app
        .as_("sam", Method::POST, "/v1/rooms/local/planning", &nameless)
        .await;
    assert_eq!(answer.json()["req_id"], "", "{}", answer.body);

    // On a session: 413 for the POST, and the error with its req_id on the stream.
    let auth = format!("Bearer {}", app.token("sam"));
    let created = app
        .call(Method::POST, "/session", &[("authorization", &auth)], "")
        .await;
    let session = created.json()["session_id"].as_str().unwrap().to_owned();
    let big = envelope("ping", "big-2", &pad);
    let sent = app
        .call(
            Method::POST,
            "/send",
            &[("authorization", &auth), ("x-session-id", &session)],
            big,
        )
        .await;
    assert_eq!(sent.status, StatusCode::PAYLOAD_TOO_LARGE);
    let stream = app
        .send(
            Method::GET,
            "/stream",
            &[("authorization", &auth), ("x-session-id", &session)],
            "",
        )
        .await;
    let events = sse_data(stream, 1).await;
    assert_eq!(events[0]["req_id"], "big-2", "{}", events[0]);
}

/// An A2E message of type `kind` and id `id`, its envelope first, then a field `pad`.
fn envelope(kind: &str, id: &str, pad: &str) -> String {
    format!(r#"{{"type":"{kind}","id":"{id}","version":"1.0","ts":1764460800.5,"pad":"{pad}"}}"#)
}

/// The `data:` of the first `n` Server-Sent Events of `response`, as JSON.
async fn sse_data(response: hyper::Response<hyper::body::Incoming>, n: usize) -> Vec<Value> {
    let mut body = response.into_body();
    let mut text = String::new();
    let mut events = Vec::new();
    while events.len() < n {
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
            if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                events.push(serde_json::from_str(data).unwrap());
            }
        }
    }
    events
}

/// Waits until `response`'s body ends (or fails); how long that took, `None` after `within`.
async fn ends_within(
    response: hyper::Response<hyper::body::Incoming>,
    within: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let mut body = response.into_body();
    loop {
        let left = within.saturating_sub(started.elapsed());
        match timeout(left, body.frame()).await {
            Err(_) => return None,
            Ok(None | Some(Err(_))) => return Some(started.elapsed()),
            Ok(Some(Ok(_))) => {}
        }
    }
}

/// A session is used only by the principal it acts for: another principal's token on its id
/// is a 404 on `/send` and `/stream`, and nothing is admitted to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_session_is_used_only_by_the_principal_that_opened_it() {
    let app = spawn_app().await;
    let sam = format!("Bearer {}", app.token("sam"));
    let sue = format!("Bearer {}", app.token("sue"));
    let created = app
        .call(Method::POST, "/session", &[("authorization", &sam)], "")
        .await;
    let session = created.json()["session_id"].as_str().unwrap().to_owned();
    let ping = |req: &str| envelope("ping", req, "");
    app.call(
        Method::POST,
        "/send",
        &[("authorization", &sue), ("x-session-id", &session)],
        ping("sue-1"),
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "unknown_session");
    app.call(
        Method::GET,
        "/stream",
        &[("authorization", &sue), ("x-session-id", &session)],
        "",
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "unknown_session");
    // Its own principal goes on using it, and sees only its own message answered.
    let sent = app
        .call(
            Method::POST,
            "/send",
            &[("authorization", &sam), ("x-session-id", &session)],
            ping("sam-1"),
        )
        .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{sent:?}");
    let stream = app
        .send(
            Method::GET,
            "/stream",
            &[("authorization", &sam), ("x-session-id", &session)],
            "",
        )
        .await;
    let events = sse_data(stream, 1).await;
    assert_eq!(events[0]["req_id"], "sam-1", "{}", events[0]);
}

/// One principal filling its share of sessions is refused alone (429 naming the limit);
/// another principal of the Room still gets one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_filling_its_share_of_sessions_never_refuses_another() {
    let app = spawn_app_configured(&[], |config| config.sessions_per_principal = 2).await;
    let sam = format!("Bearer {}", app.token("sam"));
    for _ in 0..2 {
        let created = app
            .call(Method::POST, "/session", &[("authorization", &sam)], "")
            .await;
        assert_eq!(created.status, StatusCode::OK, "{created:?}");
    }
    let refused = app
        .call(Method::POST, "/session", &[("authorization", &sam)], "")
        .await;
    let body = refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "too_many_sessions");
    assert!(
        body["message"].as_str().unwrap().contains("2 sessions"),
        "{body}"
    );
    assert_eq!(refused.headers["retry-after"], "1");
    for who in ["sue", "olive"] {
        let auth = format!("Bearer {}", app.token(who));
        let created = app
            .call(Method::POST, "/session", &[("authorization", &auth)], "")
            .await;
        assert_eq!(created.status, StatusCode::OK, "{who}: {created:?}");
    }
}

/// One principal's notification streams are bounded (429 naming the limit) without
/// refusing another principal's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_filling_its_share_of_streams_never_refuses_another() {
    let app = spawn_app_with(&[], |_| {}, ConnectionLimits::default(), 2).await;
    let olive = format!("Bearer {}", app.token("olive"));
    let mut open = Vec::new();
    for _ in 0..2 {
        let stream = app
            .send(
                Method::GET,
                "/v1/rooms/local/notifications",
                &[("authorization", &olive)],
                "",
            )
            .await;
        assert_eq!(stream.status(), StatusCode::OK);
        open.push(stream);
    }
    let refused = app
        .call(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &olive)],
            "",
        )
        .await;
    let body = refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "too_many_streams");
    assert!(
        body["message"].as_str().unwrap().contains("2 open"),
        "{body}"
    );
    let rita = format!("Bearer {}", app.token("rita"));
    let other = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &rita)],
            "",
        )
        .await;
    assert_eq!(other.status(), StatusCode::OK);
}

/// A revoked token ends its open streams within about a second: the notification stream and
/// an A2E session's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_revoked_token_ends_its_open_streams_within_a_second() {
    let app = spawn_app().await;
    let (record, token) = issue(&app.store, &local(), "olive", None).await;
    let auth = format!("Bearer {token}");
    let notifications = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(notifications.status(), StatusCode::OK);
    let created = app
        .call(Method::POST, "/session", &[("authorization", &auth)], "")
        .await;
    let session = created.json()["session_id"].as_str().unwrap().to_owned();
    let a2e = app
        .send(
            Method::GET,
            "/stream",
            &[("authorization", &auth), ("x-session-id", &session)],
            "",
        )
        .await;
    assert_eq!(a2e.status(), StatusCode::OK);
    // Still open while the token is good.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    app.store
        .revoke_token(&record.id, SystemClock.now())
        .await
        .unwrap();
    let (notifications, a2e) = tokio::join!(
        ends_within(notifications, Duration::from_secs(5)),
        ends_within(a2e, Duration::from_secs(5)),
    );
    println!("after revocation: notifications ended in {notifications:?}, A2E stream in {a2e:?}");
    let notifications = notifications.expect("the notification stream outlived its token");
    let a2e = a2e.expect("the A2E stream outlived its token");
    assert!(
        notifications < Duration::from_millis(1_500),
        "{notifications:?}"
    );
    assert!(a2e < Duration::from_millis(1_500), "{a2e:?}");
}

/// A membership change ends the stream of a principal who may no longer read objectives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_revoked_membership_ends_the_principals_stream_within_a_second() {
    let app = spawn_app().await;
    let auth = format!("Bearer {}", app.token("sam"));
    let stream = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(stream.status(), StatusCode::OK);
    app.coordinator
        .change_membership(
            &local(),
            InputId::named("revoke sam for the stream test"),
            p("olive"),
            p("sam"),
            Role::Specialist,
            MembershipChange::Revoke,
        )
        .await
        .unwrap();
    let ended = ends_within(stream, Duration::from_secs(5)).await;
    println!("after the membership was revoked: the stream ended in {ended:?}");
    let ended = ended.expect("the stream outlived the membership");
    assert!(ended < Duration::from_millis(1_500), "{ended:?}");
}

/// `who`'s notification stream, open.
async fn open_stream(app: &App, who: &str) -> hyper::Response<hyper::body::Incoming> {
    let auth = format!("Bearer {}", app.token(who));
    let stream = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(stream.status(), StatusCode::OK);
    stream
}

/// A role taken back narrows an open stream from then on: a principal that was a reviewer
/// when it connected, and is a specialist only now, is not sent what is addressed to
/// reviewers (the stream stays open: it may still read objectives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_role_taken_back_narrows_an_open_stream() {
    let app = spawn_app().await;
    let room = local();
    let membership = |change, key: &'static str| {
        app.coordinator.change_membership(
            &room,
            InputId::named(key),
            p("olive"),
            p("sam"),
            Role::Reviewer,
            change,
        )
    };
    membership(MembershipChange::Grant, "sam reviews")
        .await
        .unwrap();
    let sam = open_stream(&app, "sam").await;
    let rita = open_stream(&app, "rita").await;
    membership(MembershipChange::Revoke, "sam reviews no more")
        .await
        .unwrap();
    // The streams re-check twice a second.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let text = "Summarize what changed in durable agent runtimes, with sources for every claim.";
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &serde_json::json!({"kind": "owner_message", "text": text}).to_string(),
    )
    .await;
    app.settle().await;
    let for_reviewers = crate::reviewer_ids(&app);
    assert_eq!(
        for_reviewers.len(),
        1,
        "{:?}",
        app.feed.notifications(&local())
    );
    assert_eq!(crate::read_events(rita, 1).await, for_reviewers);
    // sam's stream: still open, and without what is addressed to reviewers.
    let mut body = sam.into_body();
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match timeout(left, body.frame()).await {
            Err(_) => break,
            Ok(None | Some(Err(_))) => panic!("sam's stream ended: {seen}"),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    seen.push_str(std::str::from_utf8(&data).unwrap());
                }
            }
        }
    }
    assert!(
        !seen.contains(&for_reviewers[0]),
        "a former reviewer was sent a notification for reviewers: {seen}"
    );
}
