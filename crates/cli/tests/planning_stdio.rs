//! `agentroom planning --stdio` as a client sees it: the real binary, spawned with its own
//! data root, spoken to with the exact lines of A2E-PROTOCOL.md and seed 000, and killed with
//! SIGKILL to show that every acknowledged message survives.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agentroom_planning::conformance::check_envelope;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

/// A running `agentroom planning --stdio`.
struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Host {
    fn start(root: &Path) -> Host {
        Host::start_with(root, &[])
    }

    /// `agentroom planning --stdio` with `extra` arguments.
    fn start_with(root: &Path, extra: &[&str]) -> Host {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(["planning", "--stdio"])
            .args(extra)
            .arg("--root")
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Host {
            child,
            stdin,
            lines,
        }
    }

    /// The host on `--fsync` (every commit survives power loss): the group commit's case.
    fn start_fsync(root: &Path) -> Host {
        Host::start_with(root, &["--fsync"])
    }

    fn write(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn read(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("no reply line within {WAIT:?}: {e}"));
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        check_envelope(&value);
        value
    }

    /// Sends `messages` in one write, which the host reads as one group, and reads as many
    /// replies.
    fn ask_together(&mut self, messages: &[Value]) -> Vec<Value> {
        let mut batch = String::new();
        for message in messages {
            batch.push_str(&message.to_string());
            batch.push('\n');
        }
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(batch.as_bytes()).unwrap();
        stdin.flush().unwrap();
        (0..messages.len()).map(|_| self.read()).collect()
    }

    /// A plan made by plan/create; its id.
    fn create_plan(&mut self) -> String {
        self.ask(&json!({"type": "planning/plan/create", "id": "c"}))["plan_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn ask(&mut self, message: &Value) -> Value {
        self.write(&message.to_string());
        self.read()
    }

    /// Waits for the process to exit by itself.
    fn exit_status(&mut self) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the host did not exit"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn no_more_output(&self) {
        match self.lines.recv_timeout(Duration::from_secs(2)) {
            Err(_) => {}
            Ok(line) => panic!("unexpected output: {line}"),
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_seed_wire_example_gets_replies_of_exactly_the_seed_shape() {
    let root = tempfile::tempdir().unwrap();
    let mut host = Host::start(root.path());
    let created = host.ask(
        &json!({"type": "planning/plan/create", "id": "r1", "name": "release",
        "columns": ["backlog", "todo", "in_progress", "done"], "description": "ship it"}),
    );
    assert_eq!(created["type"], "planning/plan/create/resp");
    assert_eq!(created["req_id"], "r1");
    assert_eq!(created["success"], true);
    assert_eq!(
        created["columns"],
        json!(["backlog", "todo", "in_progress", "done"])
    );
    let plan = created["plan_id"].as_str().unwrap().to_owned();

    let added = host.ask(
        &json!({"type": "planning/task/add", "id": "r2", "plan_id": plan,
        "title": "write spec", "status": "todo"}),
    );
    assert_eq!(added["type"], "planning/task/add/resp");
    assert_eq!(added["success"], true);
    assert_eq!(added["status"], "todo");
    let task = added["task_id"].as_str().unwrap().to_owned();

    let board = host.ask(&json!({"type": "planning/plan/board", "id": "r3", "plan_id": plan}));
    assert_eq!(board["type"], "planning/plan/board/resp");
    assert_eq!(
        board["boards"],
        json!([{"plan_id": plan, "name": "release",
                "columns": ["backlog", "todo", "in_progress", "done"],
                "tasks": {"backlog": [],
                          "todo": [{"task_id": task, "title": "write spec", "status": "todo", "assignee": ""}],
                          "in_progress": [], "done": []}}])
    );
    drop(host.stdin.take());
    assert!(host.exit_status().success(), "EOF ends the host cleanly");
}

#[test]
fn the_sdk_client_flow_works_and_shutdown_ends_the_process() {
    let root = tempfile::tempdir().unwrap();
    let mut host = Host::start(root.path());
    // The exact lines of A2E-PROTOCOL.md.
    host.write(r#"{"type":"handshake/req","id":"a1","version":"1.0","ts":1764460800.0,"agent_id":"ag","agent_caps":["planning"],"auth_token":""}"#);
    let hello = host.read();
    assert_eq!(hello["type"], "handshake/resp");
    assert_eq!(hello["req_id"], "a1");
    assert_eq!(hello["ok"], true);
    assert_eq!(hello["accepted_caps"][0]["capability"], "planning");
    host.write(r#"{"type":"planning/task/add","id":"a2","version":"1.0","ts":1764460801.0,"plan_id":"p1","title":"write spec","status":"todo","description":"","assignee":"","deps":[],"metadata":{}}"#);
    let orphan = host.read();
    assert_eq!(orphan["type"], "planning/task/add/resp");
    assert_eq!(orphan["req_id"], "a2");
    assert_eq!(
        orphan["success"], false,
        "a task for an unknown plan is refused"
    );
    assert_eq!(orphan["code"], "unknown_plan");
    host.write(r#"{"type":"planning/plan/delete","id":"a3","version":"1.0","ts":1764460802.0}"#);
    let unknown = host.read();
    assert_eq!(unknown["type"], "error");
    assert_eq!(unknown["req_id"], "a3");
    assert_eq!(unknown["code"], "invalid_message");

    // The six planning messages as the SDK's PlanningAPI sends them (every field).
    let created = host.ask(
        &json!({"type": "planning/plan/create", "id": "b1", "version": "1.0",
        "ts": 1.0, "name": "sdk", "columns": [], "description": ""}),
    );
    let plan = created["plan_id"].as_str().unwrap().to_owned();
    let listed =
        host.ask(&json!({"type": "planning/plan/list", "id": "b2", "version": "1.0", "ts": 1.0}));
    assert_eq!(listed["plans"][0]["plan_id"], plan);
    let added = host.ask(
        &json!({"type": "planning/task/add", "id": "b3", "version": "1.0", "ts": 1.0,
        "plan_id": plan, "title": "t", "status": "backlog", "description": "", "assignee": "",
        "deps": [], "metadata": {}}),
    );
    let task = added["task_id"].as_str().unwrap().to_owned();
    let updated = host.ask(
        &json!({"type": "planning/task/update", "id": "b4", "version": "1.0",
        "ts": 1.0, "plan_id": plan, "task_id": task, "status": "done", "assignee": "", "deps": []}),
    );
    assert_eq!(updated["success"], true);
    assert_eq!(updated["task_id"], task);
    let tasks = host.ask(
        &json!({"type": "planning/task/list", "id": "b5", "version": "1.0", "ts": 1.0,
        "plan_id": plan, "status": "done"}),
    );
    assert_eq!(tasks["tasks"][0]["task_id"], task);
    let board = host.ask(
        &json!({"type": "planning/plan/board", "id": "b6", "version": "1.0",
        "ts": 1.0, "plan_id": ""}),
    );
    assert_eq!(board["boards"][0]["tasks"]["done"][0]["task_id"], task);
    let pong = host.ask(&json!({"type": "ping", "id": "b7"}));
    assert_eq!(pong["type"], "pong");
    host.write(r#"{"type":"shutdown","id":"b8","version":"1.0","ts":1.0,"timeout":10}"#);
    assert!(
        host.exit_status().success(),
        "shutdown ends the host cleanly"
    );
    host.no_more_output();
}

#[test]
fn every_bad_input_is_answered_and_the_host_keeps_serving() {
    let root = tempfile::tempdir().unwrap();
    let mut host = Host::start(root.path());
    let plan =
        host.ask(&json!({"type": "planning/plan/create", "id": "c", "columns": ["todo", "done"]}))
            ["plan_id"]
            .as_str()
            .unwrap()
            .to_owned();
    let task = host.ask(&json!({"type": "planning/task/add", "id": "t", "plan_id": plan, "title": "x"}))
        ["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // (what we send, the reply's type, its code)
    let refusal = |code: &'static str, kind: &'static str| (kind, code);
    let cases: Vec<(String, (&str, &str))> = vec![
        ("{not json".to_owned(), refusal("parse_error", "error")),
        ("[1, 2]".to_owned(), refusal("parse_error", "error")),
        ("\"just a string\"".to_owned(), refusal("parse_error", "error")),
        (json!({"type": "planning/plan/delete", "id": "1"}).to_string(), refusal("invalid_message", "error")),
        (json!({"type": "planning/task/add", "id": "2", "plan_id": plan}).to_string(), refusal("schema_violation", "error")),
        (json!({"type": "planning/task/add", "id": "3", "plan_id": plan, "title": 5}).to_string(), refusal("schema_violation", "error")),
        (json!({"type": "planning/task/add", "id": "4", "plan_id": plan, "title": "t".repeat(1025)}).to_string(), refusal("schema_violation", "error")),
        (json!({"type": "planning/task/add", "id": "5", "plan_id": plan, "title": "x", "description": "d".repeat(65 * 1024)}).to_string(), refusal("schema_violation", "error")),
        (json!({"type": "planning/task/add", "id": "6", "plan_id": plan, "title": "x", "metadata": [1]}).to_string(), refusal("schema_violation", "error")),
        (json!({"type": "planning/task/add", "id": "7", "plan_id": plan, "title": "x", "metadata": {"m": "m".repeat(65 * 1024)}}).to_string(), refusal("schema_violation", "error")),
        (json!({"type": "planning/plan/create", "id": "8", "columns": "a,b"}).to_string(), refusal("schema_violation", "error")),
        (json!({"type": "planning/task/add", "id": "9", "plan_id": "nope", "title": "x"}).to_string(), refusal("unknown_plan", "planning/task/add/resp")),
        (json!({"type": "planning/task/add", "id": "10", "plan_id": plan, "title": "x", "status": "archived"}).to_string(), refusal("unknown_status", "planning/task/add/resp")),
        (json!({"type": "planning/task/add", "id": "11", "plan_id": plan, "title": "x", "deps": ["ghost"]}).to_string(), refusal("unknown_dependency", "planning/task/add/resp")),
        (json!({"type": "planning/task/update", "id": "12", "plan_id": plan, "task_id": task, "deps": [task]}).to_string(), refusal("dependency_cycle", "planning/task/update/resp")),
        (json!({"type": "planning/task/update", "id": "13", "plan_id": plan, "task_id": "ghost", "status": "done"}).to_string(), refusal("unknown_task", "planning/task/update/resp")),
        (json!({"type": "planning/task/update", "id": "14", "plan_id": plan, "task_id": task}).to_string(), refusal("nothing_to_update", "planning/task/update/resp")),
        (json!({"type": "planning/task/update", "id": "15", "plan_id": plan, "task_id": task, "status": "archived"}).to_string(), refusal("unknown_status", "planning/task/update/resp")),
        (json!({"type": "planning/plan/create", "id": "16", "columns": ["a", "a"]}).to_string(), refusal("invalid_columns", "planning/plan/create/resp")),
        (json!({"type": "planning/plan/create", "id": "17", "columns": ["a", ""]}).to_string(), refusal("invalid_columns", "planning/plan/create/resp")),
    ];
    for (line, (kind, code)) in &cases {
        host.write(line);
        let reply = host.read();
        assert_eq!(reply["type"], *kind, "{line} -> {reply}");
        assert_eq!(reply["code"], *code, "{line} -> {reply}");
        if *kind != "error" {
            assert_eq!(reply["success"], false, "{reply}");
        }
    }
    // A line over the 1 MiB message limit is skipped to its end and answered.
    let huge = json!({"type": "planning/task/add", "id": "big", "plan_id": plan, "title": "x".repeat(2 << 20)});
    host.write(&huge.to_string());
    let reply = host.read();
    assert_eq!(reply["code"], "schema_violation", "{reply}");
    // Nothing of the above was stored, and the host still serves.
    let board = host.ask(&json!({"type": "planning/plan/board", "id": "b", "plan_id": plan}));
    assert_eq!(
        board["boards"][0]["tasks"],
        json!({"todo": [{"task_id": task, "title": "x", "status": "todo", "assignee": ""}], "done": []})
    );
    let plans = host.ask(&json!({"type": "planning/plan/list", "id": "p"}));
    assert_eq!(plans["plans"].as_array().unwrap().len(), 1);
}

#[test]
fn every_acknowledged_task_survives_sigkill() {
    let root = tempfile::tempdir().unwrap();
    let mut host = Host::start(root.path());
    let plan = host.create_plan();
    let n = 300;
    // Pipelined: write every request, then read every acknowledgement.
    for i in 0..n {
        host.write(
            &json!({"type": "planning/task/add", "id": format!("t{i}"), "plan_id": plan,
            "title": format!("task {i}"), "status": "todo"})
            .to_string(),
        );
    }
    let mut acknowledged = Vec::new();
    for _ in 0..n {
        let reply = host.read();
        assert_eq!(reply["success"], true, "{reply}");
        acknowledged.push(reply["task_id"].as_str().unwrap().to_owned());
    }
    host.child.kill().unwrap(); // SIGKILL
    host.child.wait().unwrap();

    let mut again = Host::start(root.path());
    let listed = again.ask(&json!({"type": "planning/task/list", "id": "l", "plan_id": plan}));
    let stored: Vec<String> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stored, acknowledged, "every acknowledged task, in order");
}

/// Issue 21, planning group commit: a client pipelines thousands of task/adds in one write and
/// the host is SIGKILLed while it answers them. Every acknowledged task is stored, in order,
/// and what is stored is exactly a prefix of what was sent: a group's replies go out only after
/// its commit, and a group is stored whole or not at all.
#[test]
fn a_group_commit_acknowledges_only_what_it_stored_when_killed_mid_stream() {
    let root = tempfile::tempdir().unwrap();
    let mut host = Host::start_fsync(root.path());
    let plan = host.create_plan();
    let n = 3000;
    let mut batch = String::new();
    for i in 0..n {
        batch.push_str(
            &json!({"type": "planning/task/add", "id": format!("t{i}"), "plan_id": plan,
            "title": format!("task {i}"), "status": "todo"})
            .to_string(),
        );
        batch.push('\n');
    }
    let writer = {
        let mut stdin = host.stdin.take().unwrap();
        std::thread::spawn(move || {
            // The host may die before it reads everything: a broken pipe is expected.
            let _ = stdin.write_all(batch.as_bytes());
            let _ = stdin.flush();
        })
    };
    let mut acknowledged = Vec::new();
    for _ in 0..n / 3 {
        let reply = host.read();
        assert_eq!(reply["success"], true, "{reply}");
        acknowledged.push(reply["task_id"].as_str().unwrap().to_owned());
    }
    host.child.kill().unwrap(); // SIGKILL, mid-stream
    host.child.wait().unwrap();
    writer.join().unwrap();
    // Replies read after the kill were acknowledged too: drain what the pipe still held.
    while let Ok(line) = host.lines.try_recv() {
        let reply: Value = serde_json::from_str(&line).unwrap();
        acknowledged.push(reply["task_id"].as_str().unwrap().to_owned());
    }

    let mut again = Host::start(root.path());
    let listed = again.ask(&json!({"type": "planning/task/list", "id": "l", "plan_id": plan}));
    let stored: Vec<String> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        stored.len() >= acknowledged.len(),
        "{} < {}",
        stored.len(),
        acknowledged.len()
    );
    assert_eq!(
        stored[..acknowledged.len()],
        acknowledged[..],
        "every acknowledged task, in order"
    );
    let titles: Vec<String> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap().to_owned())
        .collect();
    let sent: Vec<String> = (0..stored.len()).map(|i| format!("task {i}")).collect();
    assert_eq!(titles, sent, "a prefix of what was sent, no gap");
}

/// Issue 21: one group holding writes, reads of those writes and refusals. Each message is
/// answered as it would be alone: a read sees the group's earlier writes, a refused add or a
/// cycle writes nothing and does not undo its neighbours, and everything answered as done is
/// stored once the replies are out.
#[test]
fn a_group_answers_each_message_as_alone_and_stores_what_it_acknowledged() {
    let root = tempfile::tempdir().unwrap();
    let mut host = Host::start_fsync(root.path());
    let plan = host.create_plan();
    let lines = [
        json!({"type": "planning/task/add", "id": "a", "plan_id": plan, "title": "first"}),
        json!({"type": "planning/task/add", "id": "b", "plan_id": "no-such-plan", "title": "x"}),
        json!({"type": "planning/plan/board", "id": "c", "plan_id": plan}),
        json!({"type": "planning/task/add", "id": "d", "plan_id": plan, "title": "second"}),
    ];
    let replies = host.ask_together(&lines);
    let by = |id: &str| replies.iter().find(|r| r["req_id"] == id).unwrap().clone();
    assert_eq!(by("a")["success"], true, "{replies:?}");
    assert_eq!(by("b")["success"], false, "{replies:?}");
    assert_eq!(by("b")["code"], "unknown_plan", "{replies:?}");
    let first = by("a")["task_id"].as_str().unwrap().to_owned();
    assert_eq!(
        by("c")["boards"][0]["tasks"]["backlog"][0]["task_id"],
        first.as_str()
    );
    assert_eq!(by("d")["success"], true, "{replies:?}");
    let second = by("d")["task_id"].as_str().unwrap().to_owned();

    // A dependency cycle refused inside a group undoes that update only.
    let group = [
        json!({"type": "planning/task/update", "id": "e", "plan_id": plan, "task_id": second,
               "deps": [first]}),
        json!({"type": "planning/task/update", "id": "f", "plan_id": plan, "task_id": first,
               "deps": [second]}),
        json!({"type": "planning/task/update", "id": "g", "plan_id": plan, "task_id": first,
               "status": "done"}),
    ];
    let replies = host.ask_together(&group);
    let by = |id: &str| replies.iter().find(|r| r["req_id"] == id).unwrap().clone();
    assert_eq!(by("e")["success"], true, "{replies:?}");
    assert_eq!(by("f")["success"], false, "{replies:?}");
    assert_eq!(by("g")["success"], true, "{replies:?}");
    host.child.kill().unwrap();
    host.child.wait().unwrap();

    let mut again = Host::start(root.path());
    // g is stored: the first task is done.
    let board = again.ask(&json!({"type": "planning/plan/board", "id": "s", "plan_id": plan}));
    assert_eq!(
        board["boards"][0]["tasks"]["done"][0]["task_id"],
        first.as_str(),
        "{board}"
    );
    // e is stored (the second task waits on the first), f is not: the cycle is refused again.
    let cycle = again.ask(
        &json!({"type": "planning/task/update", "id": "t", "plan_id": plan,
                                  "task_id": first, "deps": [second]}),
    );
    assert_eq!(cycle["success"], false, "{cycle}");
    let listed = again.ask(&json!({"type": "planning/task/list", "id": "l", "plan_id": plan}));
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 2, "{listed}");
}

#[test]
fn d5_migrate_down_needs_its_confirmation_and_an_unmigrated_database_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(args)
            .arg("--root")
            .arg(root.path())
            .output()
            .unwrap()
    };
    let up = run(&["migrate", "up"]);
    assert!(up.status.success(), "{up:?}");
    assert!(String::from_utf8_lossy(&up.stdout).contains("applied 0001"));
    let refused = run(&["migrate", "down"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--confirm-destroy-planner-state"),
        "{stderr}"
    );
    let status = run(&["migrate", "status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("0001 applied"),
        "{status:?}"
    );
    // The embedded file keeps one ledger: --workflows is PostgreSQL's, refused here.
    let refused = run(&[
        "migrate",
        "down",
        "--workflows",
        "--confirm-destroy-workflow-state",
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(stderr.contains("keeps one migration ledger"), "{stderr}");
    let status = run(&["migrate", "status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("planner   0001 applied"),
        "{status:?}"
    );
    let down = run(&["migrate", "down", "--confirm-destroy-planner-state"]);
    assert!(down.status.success(), "{down:?}");
    let status = run(&["migrate", "status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("0001 pending"),
        "{status:?}"
    );
    // The file exists but is not migrated: the host refuses with advice, and does not migrate.
    let mut host = Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(["planning", "--stdio", "--root"])
        .arg(root.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!host.status.success());
    let stderr = String::from_utf8_lossy(&host.stderr).to_string();
    assert!(stderr.contains("agentroom migrate up"), "{stderr}");
    assert!(host.stdout.is_empty(), "nothing but replies on stdout");
    host.stdout.clear();
    let status = run(&["migrate", "status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("0001 pending"),
        "{status:?}"
    );
}
