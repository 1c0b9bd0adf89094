//! What a host answers from its store survives a restart of `agentroom serve` (issue 7): the
//! decision log of an objective, the notification stream resumed with a `Last-Event-ID` from
//! before the restart (only later notifications), and an operator input retried with the same
//! `Idempotency-Key` (decided once). Real processes on an embedded SQLite database under a
//! temporary `--root`, scripted agents playing `scenarios/serve-crash.toml`; the first host is
//! killed with SIGKILL.
//!
//! Notifications come deterministically from the budget: with a limit of $0.008000 the
//! reasoner's call fits but the first specialist's reservation does not (B2), and each attempt
//! to dispatch it — after the message, and after every limit raise too small to admit it —
//! notifies the operators.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

const ROOM: &str = "lab";
const PATIENCE: Duration = Duration::from_secs(90);
/// A limit that admits the reasoner's call but not the first specialist's (B2).
const TIGHT_LIMIT: i64 = 8_000;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
    command
        .args(args)
        .env_remove("AGENTROOM_HOST")
        .env_remove("AGENTROOM_ROOM")
        .env_remove("AGENTROOM_TOKEN")
        .env_remove("AGENTROOM_DATABASE_URL")
        .env_remove("AGENTROOM_CRASH_AT")
        .env_remove("AGENTROOM_LOG");
    command
}

fn bare(args: &[&str]) -> Output {
    command(args).output().unwrap()
}

fn serve(root: &Path) -> (Child, String) {
    let mut serve = command(&["serve", "--listen", "127.0.0.1:0", "--room", ROOM])
        .arg("--root")
        .arg(root)
        .arg("--policies")
        .arg(repo("policies"))
        .arg("--agents")
        .arg(repo("scenarios/serve-crash.toml"))
        .args(["--poll-ms", "50"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix("agentroom listening on http://")
        .unwrap_or_else(|| panic!("serve did not listen: {line}"))
        .to_owned();
    (serve, address)
}

struct Host {
    root: TempDir,
    address: String,
    serve: Child,
    operator: String,
    owner: String,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

/// A response: status and body.
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl Host {
    fn start() -> Host {
        let root = tempfile::tempdir().unwrap();
        let created = bare(&[
            "room",
            "create",
            "--room",
            ROOM,
            "--owner",
            "olive",
            "--limit-micros",
            &TIGHT_LIMIT.to_string(),
            "--policies",
            repo("policies").to_str().unwrap(),
            "--member",
            "oscar=operator",
            "--member",
            "sam=specialist",
            "--member",
            "sue=specialist",
            "--member",
            "rita=reviewer",
            "--root",
            root.path().to_str().unwrap(),
        ]);
        assert!(created.status.success(), "room create: {created:?}");
        let stdout = String::from_utf8(created.stdout).unwrap();
        let token = |prefix: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("no `{prefix}` in {stdout}"))
                .trim()
                .to_owned()
        };
        let owner = token("owner token (olive): ");
        let operator = token("operator token (oscar): ");
        let (serve, address) = serve(root.path());
        Host {
            root,
            address,
            serve,
            operator,
            owner,
        }
    }

    /// SIGKILL, then another host on the same database.
    fn restart(&mut self) {
        self.serve.kill().unwrap();
        self.serve.wait().unwrap();
        let (serve, address) = serve(self.root.path());
        self.serve = serve;
        self.address = address;
    }

    fn request(&self, method: &str, path: &str, token: &str, extra: &str, body: &str) -> Answer {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n{extra}\r\n{body}",
            self.address,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap();
        Answer {
            status,
            body: body.to_owned(),
        }
    }

    fn get(&self, path: &str) -> Value {
        let answer = self.request("GET", path, &self.operator, "", "");
        assert_eq!(answer.status, 200, "GET {path}: {}", answer.body);
        answer.json()
    }

    /// An operator's raise by `micros` with `Idempotency-Key: key`.
    fn raise(&self, key: &str, micros: i64) -> Value {
        let answer = self.request(
            "POST",
            &format!("/v1/rooms/{ROOM}/budget/raise"),
            &self.operator,
            &format!("Idempotency-Key: {key}\r\n"),
            &format!(r#"{{"amount_micros":{micros}}}"#),
        );
        assert_eq!(answer.status, 200, "raise: {}", answer.body);
        answer.json()
    }

    /// The ids of the first `n` notifications the operator's stream sends, resumed after
    /// `last` when given.
    fn notifications(&self, last: Option<&str>, n: usize) -> Vec<String> {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let resume = last.map_or_else(String::new, |id| format!("Last-Event-ID: {id}\r\n"));
        let head = format!(
            "GET /v1/rooms/{ROOM}/notifications HTTP/1.1\r\nHost: {}\r\n\
             Authorization: Bearer {}\r\nAccept: text/event-stream\r\n{resume}\r\n",
            self.address, self.operator
        );
        stream.write_all(head.as_bytes()).unwrap();
        let mut ids = Vec::new();
        let mut lines = BufReader::new(stream).lines();
        while ids.len() < n {
            let line = lines.next().expect("the stream ended").unwrap();
            if let Some(id) = line.strip_prefix("id:") {
                ids.push(id.trim().to_owned());
            }
        }
        ids
    }

    fn objective(&self) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let list = self.get(&format!("/v1/rooms/{ROOM}/objectives"));
            if let Some(id) = list["items"][0]["id"].as_str() {
                return id.to_owned();
            }
            assert!(Instant::now() < deadline, "no objective: {list}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn decisions(&self, objective: &str) -> Vec<Value> {
        self.get(&format!(
            "/v1/rooms/{ROOM}/objectives/{objective}/decisions?limit=200"
        ))["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Waits until the objective's log holds `n` B2 refusals (one per dispatch attempt).
    fn wait_refusals(&self, objective: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let decisions = self.decisions(objective);
            let refused = decisions
                .iter()
                .filter(|d| d["rule"] == "B2" && d["verdict"] == "rejected")
                .count();
            if refused >= n {
                return decisions;
            }
            assert!(Instant::now() < deadline, "{n} B2 refusals? {decisions:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn limit(&self) -> i64 {
        self.get(&format!("/v1/rooms/{ROOM}/budget"))["balances"]["limit"]
            .as_i64()
            .unwrap()
    }
}

/// D1 / T5 / B4 across a restart of `serve`: the decision log is still listed; a stream resumed
/// with the Last-Event-ID from before the restart delivers only the notifications after it,
/// each once; a raise retried with its Idempotency-Key after the restart raises nothing.
#[test]
fn t5_decisions_notifications_and_operator_inputs_outlive_a_restart_of_serve() {
    let mut host = Host::start();
    let posted = host.request(
        "POST",
        &format!("/v1/rooms/{ROOM}/events"),
        &host.owner,
        "",
        r#"{"kind":"owner_message","text":"Summarize what changed in durable agent runtimes, with sources for every claim."}"#,
    );
    assert_eq!(posted.status, 202, "{}", posted.body);
    let objective = host.objective();
    host.wait_refusals(&objective, 1);
    let first = host.notifications(None, 1);
    // A raise too small to admit the specialist: decided (B4), its dispatch refused again (B2).
    let raised = host.raise("raise-once", 1);
    assert_eq!(raised["decided"], true, "{raised}");
    let limit = host.limit();
    assert_eq!(limit, TIGHT_LIMIT + 1);
    let before = host.wait_refusals(&objective, 2);
    let both = host.notifications(None, 2);
    assert_eq!(both[0], first[0]);

    host.restart();
    assert_eq!(
        host.decisions(&objective),
        before,
        "the log outlives the process"
    );
    let retried = host.raise("raise-once", 1);
    assert_eq!(retried["already_done"], true, "{retried}");
    assert_eq!(retried["revision"], raised["revision"], "{retried}");
    assert_eq!(host.limit(), limit, "the retry raised nothing");
    // Another raise after the restart: a third refusal and notification.
    assert_eq!(host.raise("raise-twice", 1)["decided"], true);
    host.wait_refusals(&objective, 3);
    let all = host.notifications(None, 3);
    assert_eq!(all[..2], both[..], "the same stable ids, in delivery order");
    let resumed = host.notifications(Some(&first[0]), 2);
    assert_eq!(resumed, all[1..].to_vec(), "only the later ones, each once");
    assert!(!resumed.contains(&first[0]));
}
