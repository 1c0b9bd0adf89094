//! Memberships while the Room runs (issue 18, T6), through the real `agentroom serve` on the
//! embedded SQLite file and on a fresh PostgreSQL database, with scripted agents and the real
//! `agentroom member` commands talking HTTP to it:
//!
//! - R1 stops the objective when its only reviewer wrote the report; the owner adds a second
//!   reviewer (`member add rita --role reviewer`) and resumes, and the objective completes with
//!   rita's review.
//! - The owner adds sam (`member add sam --role specialist --issue-token`, sam's token printed
//!   once); sam's research call runs (its reply would take 30 s,
//!   `scenarios/revoke-mid-call.toml`); the owner revokes sam: the call aborts at its next
//!   heartbeat, is charged what the journal recorded and held for a decision (D4), never
//!   applied; its readmission is refused while sam is no specialist (T3); sam's token was
//!   revoked with it: its next request is a 401.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Database, migrate_up};
use tempfile::TempDir;

const ROOM: &str = "lab";
/// How long a test waits for the host to get somewhere before it fails.
const PATIENCE: Duration = Duration::from_secs(90);
const TEXT: &str = "Summarize how durable agent runtimes recover from crashes, with sources.";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// `agentroom ARGS` with none of the environment a developer may have set.
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

/// A finished command: exit code and output.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn of(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap(),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }
}

/// Where the Room is stored: the embedded file under `dir`, or a fresh PostgreSQL database.
struct Site {
    dir: TempDir,
    db: Option<Database>,
}

impl Site {
    fn store_args(&self) -> Vec<String> {
        match &self.db {
            Some(db) => vec!["--database-url".to_owned(), db.url()],
            None => vec![
                "--root".to_owned(),
                self.dir.path().to_str().unwrap().to_owned(),
            ],
        }
    }

    /// `agentroom ARGS` on the store (no host).
    fn on_store(&self, args: &[&str]) -> Run {
        Run::of(command(args).args(self.store_args()).output().unwrap())
    }
}

/// A Room (owner olive, operator oscar, and `members`) on a store, served by `agentroom serve`
/// with scripted agents playing a scenario.
struct Host {
    site: Site,
    address: String,
    serve: Child,
}

impl Host {
    /// `pg`: a fresh database on the shared PostgreSQL server; otherwise the embedded file.
    fn start(pg: bool, scenario: &str, members: &[&str]) -> Host {
        let db = pg.then(|| {
            let db = Database::create();
            migrate_up(&db.url());
            db
        });
        let site = Site {
            dir: tempfile::tempdir().unwrap(),
            db,
        };
        let mut args = vec![
            "room",
            "create",
            "--room",
            ROOM,
            "--owner",
            "olive",
            "--limit-micros",
            "1000000",
            "--member",
            "oscar=operator",
        ];
        for member in members {
            args.extend(["--member", member]);
        }
        let policies = repo("policies");
        args.extend(["--policies", policies.to_str().unwrap()]);
        let created = site.on_store(&args);
        assert_eq!(created.code, 0, "room create: {}", created.stderr);
        let journal = site.dir.path().join("journal.jsonl");
        let mut serve = command(&["serve", "--listen", "127.0.0.1:0", "--room", ROOM]);
        serve
            .args(site.store_args())
            .arg("--policies")
            .arg(repo("policies"))
            .arg("--agents")
            .arg(repo(scenario))
            .arg("--journal")
            .arg(journal)
            // Heartbeats every 200 ms: an abort reaches a running call within that.
            .args(["--lease-ms", "600", "--poll-ms", "50"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut serve = serve.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(serve.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .trim()
            .strip_prefix("agentroom listening on http://")
            .unwrap_or_else(|| panic!("serve did not listen: {line}"))
            .to_owned();
        let host = Host {
            site,
            address,
            serve,
        };
        for (prefix, who) in [
            ("owner token (olive): ", "olive"),
            ("operator token (oscar): ", "oscar"),
        ] {
            let token = created
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("no `{prefix}` in {}", created.stdout));
            host.save_token(who, token);
        }
        host
    }

    fn on_store(&self, args: &[&str]) -> Run {
        self.site.on_store(args)
    }

    fn token_file(&self, who: &str) -> PathBuf {
        self.site.dir.path().join(format!("{who}.token"))
    }

    fn save_token(&self, who: &str, token: &str) {
        std::fs::write(self.token_file(who), format!("{}\n", token.trim())).unwrap();
    }

    /// The owner's message, persisted with `event post` (the running host accepts it).
    fn post(&self, text: &str) {
        let posted = self.on_store(&["event", "post", "--room", ROOM, "--as", "olive", text]);
        assert_eq!(posted.code, 0, "event post: {}", posted.stderr);
    }

    /// `agentroom ARGS --host URL --room lab --token-file FILE` as `who`.
    fn run(&self, who: &str, args: &[&str]) -> Run {
        let url = format!("http://{}", self.address);
        let file = self.token_file(who);
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--host", &url, "--room", ROOM, "--token-file"]);
        all.push(file.to_str().unwrap());
        Run::of(command(&all).output().unwrap())
    }

    /// [`Host::run`] that must succeed; its stdout.
    fn ok(&self, who: &str, args: &[&str]) -> String {
        let run = self.run(who, args);
        assert_eq!(run.code, 0, "{args:?} failed: {}", run.stderr);
        run.stdout
    }

    fn json(&self, who: &str, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        serde_json::from_str(&self.ok(who, &args)).unwrap()
    }

    /// Waits until the one objective has `status`; returns its id.
    fn wait_for(&self, status: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let list = self.json("oscar", &["objective", "list"]);
            if let Some(objective) = list["items"].as_array().unwrap().first()
                && objective["status"] == status
            {
                return objective["id"].as_str().unwrap().to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "no objective became {status}: {list}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The scripted agents' journal: one line per call they executed.
    fn executions(&self) -> Vec<Value> {
        std::fs::read_to_string(self.site.dir.path().join("journal.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

/// R1 stop, a second reviewer added, the objective resumed and completed.
fn r1_a_second_reviewer_added_after_an_r1_stop_completes_the_objective(pg: bool) {
    // sue writes the report and is the only reviewer: no reviewer is distinct (R1).
    let host = Host::start(
        pg,
        "scenarios/serve-crash.toml",
        &["sam=specialist", "sue=specialist,reviewer"],
    );
    host.post(TEXT);
    let id = host.wait_for("stopped_for_attention");
    let shown = host.json("olive", &["objective", "show", &id]);
    let r1 = shown["decisions"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["rule"] == "R1" && d["verdict"] == "rejected");
    assert!(r1, "no R1 stop: {shown}");

    // Only the owner manages members: the operator is refused (403), nothing changes.
    let refused = host.run("oscar", &["member", "add", "rita", "--role", "reviewer"]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("forbidden (403)") && refused.stderr.contains("membership.manage"),
        "{}",
        refused.stderr
    );
    let added = host.ok("olive", &["member", "add", "rita", "--role", "reviewer"]);
    assert!(
        added.starts_with("added member rita: reviewer\n"),
        "{added}"
    );
    assert!(added.contains("accepted T6"), "{added}");
    let list = host.ok("olive", &["member", "list"]);
    assert!(
        list.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["rita", "reviewer"]),
        "{list}"
    );
    let resumed = host.ok("olive", &["objective", "resume", &id]);
    assert!(resumed.contains("accepted D3"), "{resumed}");
    host.wait_for("completed");
    let reviews = host.json("olive", &["review", "show", &id]);
    assert_eq!(reviews["reviews"][0]["reviewer"], "rita", "{reviews}");
    assert_eq!(reviews["reviews"][0]["outcome"], "all_met", "{reviews}");
}

#[test]
fn r1_t6_a_second_reviewer_added_after_an_r1_stop_completes_the_objective_on_sqlite() {
    r1_a_second_reviewer_added_after_an_r1_stop_completes_the_objective(false);
}

#[test]
fn r1_t6_a_second_reviewer_added_after_an_r1_stop_completes_the_objective_on_postgres() {
    r1_a_second_reviewer_added_after_an_r1_stop_completes_the_objective(true);
}

/// sam added with its first token, revoked mid-call: aborted, charged and held, 403.
fn revoking_a_specialist_mid_call_aborts_it_charged_and_held_and_refuses_its_next_request(
    pg: bool,
) {
    let host = Host::start(
        pg,
        "scenarios/revoke-mid-call.toml",
        &["sue=specialist", "rita=reviewer"],
    );
    // The owner onboards sam remotely: its first token is printed once.
    let added = host.ok(
        "olive",
        &[
            "member",
            "add",
            "sam",
            "--role",
            "specialist",
            "--issue-token",
        ],
    );
    let token = added
        .lines()
        .find_map(|l| l.strip_prefix("token (sam): "))
        .unwrap_or_else(|| panic!("no token in {added}"));
    assert!(token.starts_with("ar_"), "{added}");
    host.save_token("sam", token);
    assert_eq!(host.run("sam", &["objective", "list"]).code, 0);

    host.post(TEXT);
    let deadline = Instant::now() + PATIENCE;
    let op = loop {
        let gathering = host
            .executions()
            .into_iter()
            .find(|e| e["task"].as_str().is_some_and(|t| t.ends_with("/gather")));
        if let Some(execution) = gathering {
            break execution["op"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "sam never started gathering");
        std::thread::sleep(Duration::from_millis(20));
    };
    let id = host.wait_for("running");

    let revoked = host.ok("olive", &["member", "revoke", "sam"]);
    assert!(revoked.starts_with("revoked member sam\n"), "{revoked}");
    assert!(
        revoked
            .lines()
            .any(|l| l.contains("accepted T6") && l.contains(&op) && l.contains("fenced")),
        "the running call was not fenced: {revoked}"
    );
    // sam's next request is refused at once: its token was revoked with it (401).
    let refused = host.run("sam", &["objective", "list"]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("401 unauthorized"),
        "{}",
        refused.stderr
    );

    // The call aborts (its reply was 30 s away) and what it did is charged and held (D4).
    let started = Instant::now();
    let held = loop {
        let held = host.json("oscar", &["late-result", "list"]);
        if let Some(first) = held["items"].as_array().unwrap().first() {
            break first.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the fenced call was not held before its reply: {held}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(held["op"], op.as_str(), "{held}");
    assert_eq!(held["objective"], id.as_str(), "{held}");
    let budget = host.json("oscar", &["budget", "show"]);
    assert_eq!(
        budget["spent_micros_by_principal"]["sam"].as_i64(),
        Some(3_400),
        "charged what the journal recorded: {budget}"
    );
    assert_eq!(
        budget["balances"]["uncertain"].as_i64(),
        Some(0),
        "{budget}"
    );
    // Never applied: gather is not done and the report was never asked for.
    let shown = host.json("olive", &["objective", "show", &id]);
    let done = &shown["objective"]["board"]["columns"][3]["tasks"];
    assert_eq!(done.as_array().map(Vec::len), Some(0), "{shown}");
    assert!(
        host.executions()
            .iter()
            .all(|e| !e["task"].as_str().unwrap_or_default().ends_with("/write")),
        "the report was written on an unapplied result"
    );
    // T3 at the sink: no readmission while sam is no specialist; it stays held.
    let readmit = host.run("olive", &["late-result", "readmit", &op]);
    assert_eq!(readmit.code, 1, "{}", readmit.stdout);
    assert!(
        readmit.stderr.contains("refused by rule T3"),
        "{}",
        readmit.stderr
    );
    let still = host.json("oscar", &["late-result", "list"]);
    assert_eq!(still["items"].as_array().unwrap().len(), 1, "{still}");
}

#[test]
fn t6_revoking_a_specialist_mid_call_aborts_it_charged_and_held_and_refuses_its_token_401_on_sqlite()
 {
    revoking_a_specialist_mid_call_aborts_it_charged_and_held_and_refuses_its_next_request(false);
}

#[test]
fn t6_revoking_a_specialist_mid_call_aborts_it_charged_and_held_and_refuses_its_token_401_on_postgres()
 {
    revoking_a_specialist_mid_call_aborts_it_charged_and_held_and_refuses_its_next_request(true);
}

#[test]
fn member_commands_document_their_exit_codes_and_refuse_bad_arguments_before_any_request() {
    for sub in [
        &["member"][..],
        &["member", "list"],
        &["member", "add"],
        &["member", "role"],
        &["member", "revoke"],
    ] {
        let help = Run::of(command(&[sub, &["--help"]].concat()).output().unwrap());
        assert_eq!(help.code, 0);
        assert!(
            help.stdout.contains("Exit codes: 0 done; 1 error"),
            "{sub:?}: {}",
            help.stdout
        );
    }
    // Usage errors exit 2: an unknown role, no role, a principal that is no id.
    let host = "http://127.0.0.1:9";
    for usage in [
        vec!["member", "add", "bea", "--role", "boss"],
        vec!["member", "add", "bea"],
        vec!["member", "role", "Bea!", "--role", "reviewer"],
        vec!["member", "revoke"],
    ] {
        let out = Run::of(
            command(&[&usage[..], &["--host", host, "--room", ROOM]].concat())
                .output()
                .unwrap(),
        );
        assert_eq!(out.code, 2, "{usage:?}: {}", out.stderr);
    }
}

/// T3: `agentroom room access` replaces a Room's stored access policy with the host's
/// `access.toml` (a Room keeps the policy it was created with): it prints what each role gains
/// and loses, and the same policy again, or a Room that does not exist, is refused with
/// nothing changed.
#[test]
fn t3_room_access_replaces_a_rooms_stored_policy_and_says_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let root = root.to_str().unwrap();
    let run = |args: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(args)
            .args(["--root", root])
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let created = run(&[
        "room",
        "create",
        "--room",
        ROOM,
        "--owner",
        "olive",
        "--member",
        "oscar=operator",
        "--limit-micros",
        "1000000",
    ]);
    assert!(created.status.success(), "{created:?}");
    // A host whose access.toml no longer lets operators manage memory.
    let policies = dir.path().join("strict");
    std::fs::create_dir_all(&policies).unwrap();
    let shipped = std::fs::read_to_string(repo("policies/access.toml")).unwrap();
    let (head, tail) = shipped.split_once("[roles.operator]").unwrap();
    let tail = tail.replacen("    \"memory.manage\",\n", "", 1);
    std::fs::write(
        policies.join("access.toml"),
        format!("{head}[roles.operator]{tail}"),
    )
    .unwrap();
    let policies = policies.to_str().unwrap();
    let replaced = run(&["room", "access", "--room", ROOM, "--policies", policies]);
    let stdout = String::from_utf8_lossy(&replaced.stdout);
    assert!(replaced.status.success(), "{replaced:?}");
    assert!(
        stdout.contains("replaced the Room's access policy: operator -memory.manage"),
        "{stdout}"
    );
    for (args, says) in [
        (
            vec!["room", "access", "--room", ROOM, "--policies", policies],
            "already this one",
        ),
        (
            vec![
                "room",
                "access",
                "--room",
                "elsewhere",
                "--policies",
                policies,
            ],
            "no room elsewhere",
        ),
    ] {
        let refused = run(&args);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}
