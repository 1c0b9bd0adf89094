//! The real binary as an HTTP host (`agentroom serve`) and on PostgreSQL
//! (`--database-url`): started, spoken to, stopped with SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentroom_planning::conformance::check_envelope;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(["serve", "--listen", "127.0.0.1:0", "--anonymous-planning"])
            .args([
                "--policies",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies"),
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("agentroom listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Server { child, addr }
    }

    /// One HTTP/1.1 request; returns status, headers and body.
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_owned(), body.to_owned())
    }

    fn planning(&self, message: &Value) -> Value {
        let (status, _, body) = self.request(
            "POST",
            "/v1/planning",
            &[("Content-Type", "application/json")],
            &message.to_string(),
        );
        assert_eq!(status, 200, "{body}");
        let reply: Value = serde_json::from_str(&body).unwrap();
        check_envelope(&reply);
        reply
    }

    fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "serve exited with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads SSE `data:` lines from a `GET /stream` until `count` replies arrived.
fn read_stream(addr: &str, session: &str, count: usize) -> Vec<Value> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(stream, "GET /stream HTTP/1.1\r\nHost: {addr}\r\nX-Session-Id: {session}\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    let mut reader = BufReader::new(stream);
    let mut replies = Vec::new();
    let mut line = String::new();
    while replies.len() < count {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "stream ended early"
        );
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            let reply: Value = serde_json::from_str(data).unwrap();
            check_envelope(&reply);
            replies.push(reply);
        }
    }
    replies
}

#[test]
fn serve_answers_the_a2e_http_transport_and_v1_planning_then_stops_on_sigterm() {
    let root = tempfile::tempdir().unwrap();
    let server = Server::start(&["--root", root.path().to_str().unwrap()]);
    let (status, _, body) = server.request("GET", "/health", &[], "");
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));

    // The SDK's HTTPTransport: a session, the handshake before the stream connects, replies
    // on the stream.
    let (status, _, body) = server.request("POST", "/session", &[], "");
    assert_eq!(status, 200, "{body}");
    let session: Value = serde_json::from_str(&body).unwrap();
    let session = session["session_id"].as_str().unwrap().to_owned();
    let send = |line: &str| {
        let (status, _, body) =
            server.request("POST", "/send", &[("X-Session-Id", &session)], line);
        assert!((200..300).contains(&status), "{status} {body}");
    };
    send(
        r#"{"type":"handshake/req","id":"a1","version":"1.0","ts":1764460800.0,"agent_id":"ag","agent_caps":["planning"],"auth_token":""}"#,
    );
    send(r#"{"type":"planning/plan/create","id":"a2","name":"over http"}"#);
    let replies = read_stream(&server.addr, &session, 2);
    let by_id = |id: &str| replies.iter().find(|r| r["req_id"] == id).cloned().unwrap();
    assert_eq!(by_id("a1")["type"], "handshake/resp");
    let plan = by_id("a2")["plan_id"].as_str().unwrap().to_owned();

    // The request/response endpoint sees the same store.
    let added = server
        .planning(&json!({"type": "planning/task/add", "id": "b1", "plan_id": plan, "title": "x"}));
    assert_eq!(added["success"], true);
    let board =
        server.planning(&json!({"type": "planning/plan/board", "id": "b2", "plan_id": plan}));
    assert_eq!(board["boards"][0]["tasks"]["backlog"][0]["title"], "x");
    let bad = server.request("POST", "/v1/planning", &[], "{nope");
    assert_eq!(bad.0, 200);
    assert!(bad.2.contains("\"parse_error\""), "{}", bad.2);
    server.stop();
}

fn agentroom(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn d5_on_postgresql_nothing_migrates_but_migrate_and_down_needs_its_confirmation() {
    let db = support::Database::create();
    let url = db.url();
    // Not migrated: the stdio host refuses with advice and creates nothing.
    let refused = agentroom(&["planning", "--stdio", "--database-url", &url]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("agentroom migrate up"), "{stderr}");
    let status = agentroom(&["migrate", "status", "--database-url", &url]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("0001 pending"),
        "{status:?}"
    );

    let up = agentroom(&["migrate", "up", "--database-url", &url]);
    assert!(up.status.success(), "{up:?}");
    let operations = agentroom(&["operations", "list", "--database-url", &url]);
    assert!(operations.status.success(), "{operations:?}");
    assert_eq!(
        String::from_utf8_lossy(&operations.stdout),
        "no operations\n"
    );
    // Both ledgers (issue 19): the planner's, then the workflow store's.
    let applied = String::from_utf8_lossy(&up.stdout).to_string();
    assert!(applied.contains("applied planner 0001"), "{applied}");
    assert!(applied.contains("; workflows 0001"), "{applied}");

    // The stdio host on PostgreSQL: the seed's create and add.
    let mut host = Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(["planning", "--stdio", "--database-url", &url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = host.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"type":"planning/plan/create","id":"c","name":"release"}}"#
    )
    .unwrap();
    let mut out = BufReader::new(host.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let created: Value = serde_json::from_str(&line).unwrap();
    check_envelope(&created);
    let plan = created["plan_id"].as_str().unwrap().to_owned();
    writeln!(stdin, "{}", json!({"type": "planning/task/add", "id": "t", "plan_id": plan, "title": "write spec", "status": "todo"})).unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let added: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(added["success"], true, "{added}");
    drop(stdin);
    assert!(host.wait().unwrap().success());

    let refused = agentroom(&["migrate", "down", "--database-url", &url]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--confirm-destroy-planner-state"));
    let status = agentroom(&["migrate", "status", "--database-url", &url]);
    let listed = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(listed.contains("planner   0001 applied"), "{listed}");
    assert!(
        listed.contains("workflows 0001 applied  adopt operations"),
        "{listed}"
    );
    // The workflow store's ledger has its own confirmation, and is refused while the
    // planner's commit still writes its table.
    let refused = agentroom(&["migrate", "down", "--workflows", "--database-url", &url]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--confirm-destroy-workflow-state"));
    let refused = agentroom(&[
        "migrate",
        "down",
        "--workflows",
        "--confirm-destroy-workflow-state",
        "--database-url",
        &url,
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(stderr.contains("revert them first"), "{stderr}");

    let down = agentroom(&[
        "migrate",
        "down",
        "--confirm-destroy-planner-state",
        "--database-url",
        &url,
    ]);
    assert!(down.status.success(), "{down:?}");
    assert!(
        String::from_utf8_lossy(&down.stdout).contains("operations are kept"),
        "{down:?}"
    );
    let status = agentroom(&["migrate", "status", "--database-url", &url]);
    let listed = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(listed.contains("planner   0001 pending"), "{listed}");
    assert!(listed.contains("workflows 0001 applied"), "{listed}");

    let down = agentroom(&[
        "migrate",
        "down",
        "--workflows",
        "--confirm-destroy-workflow-state",
        "--database-url",
        &url,
    ]);
    assert!(down.status.success(), "{down:?}");
    let status = agentroom(&["migrate", "status", "--database-url", &url]);
    let listed = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(listed.contains("workflows 0001 pending"), "{listed}");
    let up = agentroom(&["migrate", "up", "--database-url", &url]);
    assert!(up.status.success(), "{up:?}");
}
