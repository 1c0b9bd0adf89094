//! Hosted specialists across crashes (D2), with the real `agentroom serve` on a fresh
//! PostgreSQL database: sam's work is executed by an agent host over the REST API.
//!
//! - The process dies right after sam's submission is synced to the hosted journal and before
//!   the waiting call used it (the named crash point `after_hosted_submission`); the next
//!   process finds the call uncertain and confirms it from the journal: the task is done with
//!   the submitted contribution, charged the submitted usage, and sam is never asked again.
//! - The process is killed with SIGKILL while sam's call waits with no submission; the next
//!   process confirms from the journal that no result was accepted: the reservation is
//!   released, the old operation takes no result, and sam gets the task again under a fresh
//!   operation (never a silent replay).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::{OperationStatus, WorkflowStore};
use agentroom_store_postgres::PgRooms;
use serde_json::{Value, json};
use support::{Database, SIGKILL, migrate_up};
use tempfile::TempDir;

const ROOM: &str = "lab";
/// How long a test waits for the processes to get somewhere before it fails (a hang).
const PATIENCE: Duration = Duration::from_secs(90);
/// Short leases, so a restart waits little for the dead process's.
const LEASE_MS: &str = "500";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

struct Site {
    db: Database,
    dir: TempDir,
}

impl Site {
    fn new() -> Site {
        let db = Database::create();
        migrate_up(&db.url());
        let dir = tempfile::tempdir().unwrap();
        let policies = dir.path().join("policies");
        std::fs::create_dir_all(policies.join("capabilities")).unwrap();
        for file in ["access.toml", "prices.toml", "bindings.yaml"] {
            std::fs::copy(repo(&format!("policies/{file}")), policies.join(file)).unwrap();
        }
        for file in ["research.yaml", "writing.yaml"] {
            std::fs::copy(
                repo(&format!("policies/capabilities/{file}")),
                policies.join("capabilities").join(file),
            )
            .unwrap();
        }
        std::fs::write(
            policies.join("room.toml"),
            "[capabilities]\nfiles = [\"capabilities/research.yaml\", \"capabilities/writing.yaml\"]\nbindings = [\"bindings.yaml\"]\n",
        )
        .unwrap();
        Site { db, dir }
    }

    fn agentroom(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(args)
            .args(["--database-url", &self.db.url()])
            .env_remove("AGENTROOM_CRASH_AT")
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .output()
            .unwrap()
    }

    fn hosted_journal(&self) -> PathBuf {
        self.dir.path().join("hosted-journal.jsonl")
    }

    /// Creates the Room (sam and sue specialists, rita reviewer); returns the owner's token.
    fn create_room(&self) -> String {
        let policies = self.dir.path().join("policies");
        let mut args = vec![
            "room",
            "create",
            "--room",
            ROOM,
            "--owner",
            "olive",
            "--limit-micros",
            "1000000",
            "--model",
            "scripted",
            "--policies",
            policies.to_str().unwrap(),
        ];
        for member in ["sam=specialist", "sue=specialist", "rita=reviewer"] {
            args.extend(["--member", member]);
        }
        let out = self.agentroom(&args);
        assert!(out.status.success(), "room create failed: {out:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("owner token (olive): "))
            .unwrap_or_else(|| panic!("no owner token: {stdout}"))
            .trim()
            .to_owned()
    }

    fn token(&self, who: &str) -> String {
        let out = self.agentroom(&[
            "token",
            "issue",
            "--room",
            ROOM,
            "--principal",
            who,
            "--json",
        ]);
        assert!(out.status.success(), "token issue failed: {out:?}");
        let value: Value = serde_json::from_slice(&out.stdout).unwrap();
        value["token"].as_str().unwrap().to_owned()
    }

    /// `serve` with scripted agents for everything but sam, whose work an agent host submits.
    fn serve(&self, crash_at: Option<&str>) -> Serve {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--room", ROOM])
            .args(["--database-url", &self.db.url()])
            .arg("--policies")
            .arg(self.dir.path().join("policies"))
            .arg("--agents")
            .arg(repo("scenarios/demo.toml"))
            .arg("--journal")
            .arg(self.dir.path().join("journal.jsonl"))
            .args(["--hosted", "sam", "--hosted-journal"])
            .arg(self.hosted_journal())
            .args(["--lease-ms", LEASE_MS, "--poll-ms", "50"])
            .env_remove("AGENTROOM_CRASH_AT")
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(point) = crash_at {
            command.env("AGENTROOM_CRASH_AT", point);
        }
        let mut serve = Serve(command.spawn().unwrap(), String::new());
        let mut line = String::new();
        BufReader::new(serve.0.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        serve.1 = line
            .trim()
            .strip_prefix("agentroom listening on http://")
            .unwrap_or_else(|| panic!("serve did not listen: {line}"))
            .to_owned();
        serve
    }
}

/// One HTTP/1.1 request; status and body, or `None` when the connection closed without an
/// answer (the process died).
fn http(address: &str, method: &str, path: &str, token: &str, body: &str) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\nAuthorization: Bearer {token}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

fn get(address: &str, path: &str, token: &str) -> Value {
    let (status, body) = http(address, "GET", path, token, "").unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// A running `serve` and its address, killed if the test fails.
struct Serve(Child, String);

impl Serve {
    fn address(&self) -> &str {
        &self.1
    }

    /// Waits for sam's assignment of `key` that is not `except`; returns it.
    fn assignment(&self, token: &str, key: &str, except: Option<&str>) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let list = get(self.address(), "/v1/rooms/lab/assignments", token);
            if let Some(found) =
                list["items"].as_array().unwrap().iter().find(|a| {
                    a["task"]["key"] == key && except.is_none_or(|op| a["operation"] != op)
                })
            {
                return found.clone();
            }
            assert!(Instant::now() < deadline, "no assignment of {key}: {list}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn died_of(mut self, signal: i32) {
        if signal == SIGKILL {
            self.0.kill().unwrap();
        }
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "serve did not exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.signal(), Some(signal), "{status:?}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn op_of(assignment: &Value) -> String {
    assignment["operation"].as_str().unwrap().to_owned()
}

async fn status(site: &Site, op: &str) -> OperationStatus {
    let store = PgRooms::connect(&site.db.url()).await.unwrap();
    let op: OperationId = op.parse().unwrap();
    store.operation(op).await.unwrap().unwrap().status
}

/// Waits until operation `op` reaches `wanted`.
async fn wait_status(site: &Site, op: &str, wanted: OperationStatus) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let now = status(site, op).await;
        if now == wanted {
            return;
        }
        assert!(Instant::now() < deadline, "{op} stayed {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const NOTES: &str = "Two surveys describe checkpointed agent loops (hosted).";

fn contribution(usage: i64) -> String {
    json!({
        "outcome": "contribution",
        "artifacts": [{"name": "notes", "content": NOTES}],
        "sources": [{"kind": "external", "url": "https://example.org/durable-runtimes-2025", "digest": "sha256:f848b5c5faa537795590541cef27232e6cdfcca35ee858f4fa3e539c9fca4f65"}],
        "outputs": {"findings": [NOTES]},
        "usage_micros": usage,
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_a_submission_recorded_before_a_crash_is_confirmed_from_the_journal() {
    let site = Site::new();
    let olive = site.create_room();
    let sam = site.token("sam");
    let serve = site.serve(Some(agentroom_agents::hosted::AFTER_SUBMISSION_RECORDED));
    let text = json!({"kind": "owner_message", "text": "Summarize durable agent runtimes."});
    let (posted, body) = http(
        serve.address(),
        "POST",
        "/v1/rooms/lab/events",
        &olive,
        &text.to_string(),
    )
    .unwrap();
    assert!(posted < 300, "{body}");
    let gather = serve.assignment(&sam, "gather", None);
    let op = op_of(&gather);
    // The process dies after the journal has the submission, before the call used it.
    let answered = http(
        serve.address(),
        "POST",
        &format!("/v1/rooms/lab/assignments/{op}/result"),
        &sam,
        &contribution(3_333),
    );
    assert!(answered.is_none(), "the host answered: {answered:?}");
    serve.died_of(SIGKILL);
    let journal = std::fs::read_to_string(site.hosted_journal()).unwrap();
    assert_eq!(journal.lines().count(), 1, "{journal}");
    assert!(journal.contains(&op), "{journal}");

    // The next process confirms the call from the journal, never asking sam again.
    let serve = site.serve(None);
    wait_status(&site, &op, OperationStatus::Applied).await;
    let budget = get(serve.address(), "/v1/rooms/lab/budget?limit=200", &olive);
    assert_eq!(
        budget["spent_micros_by_principal"]["sam"].as_i64(),
        Some(3_333),
        "B3: the submitted usage is charged: {budget}"
    );
    let objectives = get(serve.address(), "/v1/rooms/lab/objectives", &olive);
    let id = objectives["items"][0]["id"].as_str().unwrap();
    let objective = get(
        serve.address(),
        &format!("/v1/rooms/lab/objectives/{id}"),
        &olive,
    );
    let gather = objective["board"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["tasks"].as_array().unwrap())
        .find(|t| t["key"] == "gather")
        .unwrap_or_else(|| panic!("no gather: {objective}"));
    assert_eq!(gather["column"], "done", "{objective}");
    let list = get(serve.address(), "/v1/rooms/lab/assignments", &sam);
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["task"]["key"] != "gather"),
        "sam was asked again: {list}"
    );
    // The one journal line is all there is: nothing was submitted twice.
    let journal = std::fs::read_to_string(site.hosted_journal()).unwrap();
    assert_eq!(journal.lines().count(), 1, "{journal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_a_call_killed_while_waiting_is_not_replayed_and_takes_no_late_result() {
    let site = Site::new();
    let olive = site.create_room();
    let sam = site.token("sam");
    let serve = site.serve(None);
    let text = json!({"kind": "owner_message", "text": "Summarize durable agent runtimes."});
    let (posted, body) = http(
        serve.address(),
        "POST",
        "/v1/rooms/lab/events",
        &olive,
        &text.to_string(),
    )
    .unwrap();
    assert!(posted < 300, "{body}");
    let first = serve.assignment(&sam, "gather", None);
    let old = op_of(&first);
    serve.died_of(SIGKILL);

    // No submission was recorded: the old call is confirmed not executed (its reservation
    // released) and the task is assigned again under a fresh operation.
    let serve = site.serve(None);
    let again = serve.assignment(&sam, "gather", Some(&old));
    assert_ne!(op_of(&again), old);
    assert_eq!(status(&site, &old).await, OperationStatus::Applied);
    let (late, body) = http(
        serve.address(),
        "POST",
        &format!("/v1/rooms/lab/assignments/{old}/result"),
        &sam,
        &contribution(1),
    )
    .unwrap();
    assert_eq!(late, 409, "the old operation takes no result: {body}");
    let (ok, body) = http(
        serve.address(),
        "POST",
        &format!("/v1/rooms/lab/assignments/{}/result", op_of(&again)),
        &sam,
        &contribution(2_000),
    )
    .unwrap();
    assert_eq!(ok, 202, "{body}");
    wait_status(&site, &op_of(&again), OperationStatus::Applied).await;
    let budget = get(serve.address(), "/v1/rooms/lab/budget?limit=200", &olive);
    assert_eq!(
        budget["spent_micros_by_principal"]["sam"].as_i64(),
        Some(2_000),
        "B3: the unexecuted call is released, the new one charged: {budget}"
    );
}
