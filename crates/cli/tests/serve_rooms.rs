//! The room loop end to end on PostgreSQL (issue 6): the real `agentroom` binary creates a
//! Room (`room create`), persists owner messages (`event post`) and runs the coordinator
//! (`serve`) with scripted agents from a scenario file, whose specialist keeps an fsynced
//! journal of what it executed. A fresh database per test on the shared server.
//!
//! - A `serve` dies at a named crash point (`AGENTROOM_CRASH_AT`: the process sends itself
//!   SIGKILL there, no unwinding and no cleanup) after a call's reservation and
//!   before its receipt; a second process dies right after recovery marked the call
//!   uncertain; a third reconciles it from the journal and finishes (D2, D6, B3).
//! - The same with two report versions reviewed by distinct reviewers (R1, R3, O3), every
//!   process a coordinator rebuilt from the store only.
//! - A `serve` is killed with SIGKILL while a specialist call it reserved has no receipt (its
//!   reply was lost: uncertain, reservation held); the next process reconciles it from the
//!   specialist's journal, never runs it again, and finishes.
//! - Two `serve` processes on one database run four objectives: no task dispatched twice,
//!   counted from the operation rows and from the journal both append to (D1, B7).
//! - Every bad input of `room create`, `event post` and `serve --room`: exit code, message,
//!   nothing written; and the same loop on the embedded SQLite file (`--root`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentroom_ports::domain::engine::CallBrief;
use agentroom_ports::domain::ids::{OperationId, RoomId};
use agentroom_ports::domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::ObjectiveStatus;
use agentroom_ports::domain::review::Verdict;
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{
    OperationFilter, OperationRecord, OperationStatus, RoomStore, StoredRoom, WorkflowStore,
};
use agentroom_store_postgres::PgRooms;
use serde_json::Value;
use support::{Database, SIGKILL, all_operations, migrate_up};
use tempfile::TempDir;

const ROOM: &str = "lab";
/// How long a test waits for the processes to get somewhere before it fails.
const PATIENCE: Duration = Duration::from_secs(90);
/// The lease of the calls `serve` runs here: short, so a restart waits little for the leases
/// of a dead process.
const LEASE_MS: &str = "500";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A fresh, migrated database, a policy folder whose `room.toml` names the shipped capability
/// and binding files (plus `benchmarking`, bound to bea), and a place for the journal.
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
            policies.join("capabilities/benchmarking.yaml"),
            "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata:\n  name: benchmarking\n  namespace: default\nspec:\n  description: Measure and compare runtimes\n  displayName: Benchmarking\n  category: data\n  inputs:\n    - name: year\n      type: string\n      required: false\n---\napiVersion: planspec.io/v1alpha1\nkind: Binding\nmetadata:\n  name: benchmarks\n  namespace: default\nspec:\n  rules:\n    - selector:\n        capabilityRef: {name: benchmarking}\n      target:\n        provider: bea\n",
        )
        .unwrap();
        std::fs::write(
            policies.join("room.toml"),
            "[capabilities]\nfiles = [\"capabilities/research.yaml\", \"capabilities/writing.yaml\", \"capabilities/benchmarking.yaml\"]\nbindings = [\"bindings.yaml\"]\n",
        )
        .unwrap();
        Site { db, dir }
    }

    fn url(&self) -> String {
        self.db.url()
    }

    fn policies(&self) -> PathBuf {
        self.dir.path().join("policies")
    }

    fn journal(&self) -> PathBuf {
        self.dir.path().join("journal.jsonl")
    }

    /// `agentroom ARGS --database-url URL`, with none of the environment a developer may set.
    fn agentroom(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(args)
            .args(["--database-url", &self.url()])
            .env_remove("AGENTROOM_CRASH_AT")
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .output()
            .unwrap()
    }

    /// `room create` of the test Room; returns what it printed.
    fn create_room(&self, members: &[&str]) -> String {
        self.create_room_named(ROOM, &self.policies(), members)
    }

    /// `room create` of Room `room` with the policy folder `policies`; returns what it
    /// printed.
    fn create_room_named(&self, room: &str, policies: &Path, members: &[&str]) -> String {
        let mut args = vec![
            "room",
            "create",
            "--room",
            room,
            "--owner",
            "olive",
            "--limit-micros",
            "1000000",
            "--model",
            "scripted",
            "--policies",
        ];
        args.push(policies.to_str().unwrap());
        for member in members {
            args.extend(["--member", member]);
        }
        let out = self.agentroom(&args);
        assert!(out.status.success(), "room create failed: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// `event post` as the owner; returns the event id it printed.
    fn post(&self, text: &str) -> String {
        let out = self.agentroom(&["event", "post", "--room", ROOM, "--as", "olive", text]);
        assert!(out.status.success(), "event post failed: {out:?}");
        let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert_eq!(id.len(), 36, "not an event id: {id}");
        id
    }

    /// Starts `agentroom serve` playing `scenario`, crashing at `crash_at` if given.
    fn serve(&self, scenario: &str, crash_at: Option<&str>) -> Serve {
        self.serve_with(scenario, crash_at, &[])
    }

    /// [`Site::serve`] with more arguments.
    fn serve_with(&self, scenario: &str, crash_at: Option<&str>, extra: &[&str]) -> Serve {
        let mut command = self.serve_command(scenario, crash_at, extra);
        command.args(["--room", ROOM]);
        Serve(command.spawn().unwrap())
    }

    /// The command of [`Site::serve_with`] without `--room` (every Room on the store), its
    /// stderr inherited.
    fn serve_command(&self, scenario: &str, crash_at: Option<&str>, extra: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(["--database-url", &self.url()])
            .arg("--policies")
            .arg(self.policies())
            .arg("--agents")
            .arg(repo(scenario))
            .arg("--journal")
            .arg(self.journal())
            .args(if extra.contains(&"--lease-ms") {
                &[][..]
            } else {
                &["--lease-ms", LEASE_MS][..]
            })
            .args(["--poll-ms", "50"])
            .args(extra)
            .env_remove("AGENTROOM_CRASH_AT")
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(point) = crash_at {
            command.env("AGENTROOM_CRASH_AT", point);
        }
        command
    }

    async fn store(&self) -> PgRooms {
        PgRooms::connect(&self.url()).await.unwrap()
    }

    /// The Room with every objective it held (closed ones read back from their records).
    async fn room(&self) -> StoredRoom {
        held(&self.store().await, &RoomId::parse(ROOM).unwrap()).await
    }

    /// Waits until the Room has `n` objectives, all completed.
    async fn wait_completed(&self, n: usize) -> StoredRoom {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let room = self.room().await;
            let objectives = room.state.objectives();
            if objectives.len() == n
                && objectives
                    .iter()
                    .all(|o| o.status() == ObjectiveStatus::Completed)
            {
                return room;
            }
            let statuses: Vec<_> = objectives.iter().map(|o| o.status()).collect();
            assert!(
                Instant::now() < deadline,
                "the objectives did not complete: {statuses:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The journal's executions, each as JSON.
    fn executions(&self) -> Vec<Value> {
        std::fs::read_to_string(self.journal())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// One HTTP/1.1 request to `address` (with `token` as a bearer token); status and body.
fn http(address: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let (status, _, body) = http_with_head(address, method, path, token, body);
    (status, body)
}

/// [`http`], with the response's head (status line and headers) too.
fn http_with_head(
    address: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
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

/// The `x-request-id` header of a response head.
fn request_id(head: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("x-request-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no x-request-id in {head}"))
}

/// A running `serve`, killed if the test fails.
struct Serve(Child);

impl Serve {
    /// Reads the first line; `None` when the process ended before it listened.
    fn listening(&mut self) -> Option<String> {
        let mut line = String::new();
        BufReader::new(self.0.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        line.trim()
            .strip_prefix("agentroom listening on http://")
            .map(str::to_owned)
    }

    /// Waits for the process to die at its crash point (SIGKILL).
    fn crashed(mut self) {
        let status = wait(&mut self.0);
        assert_eq!(
            status.signal(),
            Some(SIGKILL),
            "serve did not die at its crash point: {status:?}"
        );
    }

    /// SIGKILL, and the process died of it.
    fn kill(mut self) {
        self.0.kill().unwrap();
        let status = wait(&mut self.0);
        assert_eq!(status.signal(), Some(support::SIGKILL), "{status:?}");
    }

    /// SIGTERM: a graceful stop, exit 0.
    fn stop(self) {
        self.stop_timed();
    }

    /// SIGTERM: a graceful stop, exit 0; how long the process took to exit.
    fn stop_timed(mut self) -> Duration {
        let pid = self.0.id().to_string();
        let sent = Instant::now();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = wait(&mut self.0);
        assert!(status.success(), "serve exited with {status:?}");
        sent.elapsed()
    }
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "serve did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The task identity a specialist operation executes.
fn task_of(brief: &CallBrief) -> Option<String> {
    match brief {
        CallBrief::Execute(task) => Some(task.identity.to_string()),
        _ => None,
    }
}

/// `room` as stored with its closed objectives' records put back: every objective it held
/// (issue 21: a closed objective leaves the live state for its record).
async fn held(store: &impl RoomStore, room: &RoomId) -> StoredRoom {
    let live = store.load(room).await.unwrap().unwrap();
    let records = store.all_objective_records(room).await.unwrap();
    live.with_records(records)
}

/// Checks, from the operation rows, the ledger rows and the journal: every operation applied
/// and closed once; no operation executed twice; no task dispatched or executed twice; the
/// ledger replays to the stored balances with nothing held, and the charges add up to the
/// micro to `spent` and to the scenario's charges (`expected_spent`). Returns the closing
/// ledger row of each operation.
async fn no_task_twice_and_the_ledger_adds_up(
    site: &Site,
    expected_spent: i64,
) -> BTreeMap<OperationId, LedgerEntry> {
    let store = site.store().await;
    let room = RoomId::parse(ROOM).unwrap();
    let stored = store.load(&room).await.unwrap().unwrap();
    let records = all_operations(&store).await;

    // Operation rows: all applied; one specialist operation per task identity.
    let mut dispatched: BTreeMap<String, usize> = BTreeMap::new();
    for (op, record) in &records {
        assert_eq!(record.status, OperationStatus::Applied, "{op}: {record:?}");
        if let Some(task) = task_of(&record.request.brief) {
            *dispatched.entry(task).or_default() += 1;
        }
    }
    assert!(!dispatched.is_empty());
    for (task, n) in &dispatched {
        assert_eq!(*n, 1, "task {task} was dispatched {n} times");
    }

    // The journal: each operation executed once, each task identity executed once, and every
    // executed operation has its row.
    let executions = site.executions();
    let ops: Vec<OperationId> = executions
        .iter()
        .map(|e| e["op"].as_str().unwrap().parse().unwrap())
        .collect();
    let distinct: BTreeSet<OperationId> = ops.iter().copied().collect();
    assert_eq!(distinct.len(), ops.len(), "an operation executed twice");
    assert!(distinct.iter().all(|op| records.contains_key(op)));
    let mut executed: BTreeMap<String, usize> = BTreeMap::new();
    for e in executions.iter().filter(|e| e["role"] == "specialist") {
        *executed
            .entry(e["task"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(
        executed.keys().collect::<Vec<_>>(),
        dispatched.keys().collect::<Vec<_>>(),
        "the journal and the operation rows disagree on the tasks run"
    );
    for (task, n) in &executed {
        assert_eq!(*n, 1, "task {task} was executed {n} times");
    }

    // The ledger: one reservation and one closing row per operation; replayed = stored.
    let rows = store.ledger(&room).await.unwrap();
    let mut closing = BTreeMap::new();
    let mut reserved = BTreeSet::new();
    for row in &rows {
        match row {
            LedgerEntry::Reserved { op, .. } => assert!(reserved.insert(*op), "{op} twice"),
            LedgerEntry::Settled { op, .. } | LedgerEntry::Released { op, .. } => {
                assert!(
                    closing.insert(*op, row.clone()).is_none(),
                    "{op} closed twice"
                );
            }
            _ => {}
        }
    }
    assert_eq!(reserved, records.keys().copied().collect::<BTreeSet<_>>());
    assert_eq!(reserved, closing.keys().copied().collect::<BTreeSet<_>>());
    let balances = stored.state.ledger().balances();
    assert_eq!(BudgetLedger::replay(&rows).unwrap().balances(), balances);
    assert_eq!(balances.reserved, UsdMicros::ZERO);
    assert_eq!(balances.uncertain, UsdMicros::ZERO);
    let charged: i64 = closing
        .values()
        .map(|row| match row {
            LedgerEntry::Settled { charged, .. } => charged.micros(),
            _ => 0,
        })
        .sum();
    assert_eq!(charged, balances.spent.micros());
    assert_eq!(
        charged, expected_spent,
        "the scenario's charges, to the micro"
    );
    assert_eq!(
        balances.available.micros(),
        1_000_000 - expected_spent,
        "available = limit - spent - reserved (B2)"
    );
    closing
}

/// The crash and restarts shared by the first two tests: a `serve` dies after the first
/// call's reservation and its execution, before its receipt; the call is in flight with its
/// reservation held. A second dies right after recovery marked it uncertain: still held,
/// never replayed. Returns the operation and its reservation; a third process finishes.
async fn die_after_the_call_then_after_marking_it_uncertain(
    site: &Site,
    scenario: &str,
    post_while_running: Option<&str>,
) -> (OperationId, UsdMicros) {
    let mut first = site.serve(scenario, Some("after_call"));
    if let Some(text) = post_while_running {
        // T1: a running serve accepts an event another process persisted.
        assert!(first.listening().is_some(), "serve did not start");
        site.post(text);
    }
    first.crashed();

    let store = site.store().await;
    let records = all_operations(&store).await;
    assert_eq!(records.len(), 1, "{records:?}");
    let (op, record) = records.into_iter().next().unwrap();
    assert_eq!(record.request.role, CallRole::Reasoner);
    assert_eq!(record.status, OperationStatus::InFlight);
    assert!(record.receipt.is_none(), "killed before the receipt");
    let reservation = record.request.reservation;
    let held = site.room().await.state.ledger().balances();
    assert_eq!(held.reserved, reservation, "B1: the reservation is held");
    assert_eq!(held.spent, UsdMicros::ZERO);
    let executed = site.executions();
    assert_eq!(executed.len(), 1, "the call ran before the crash");
    assert_eq!(executed[0]["op"], op.to_string());

    // The next process classifies it from durable evidence only (D2) and dies right after
    // marking it uncertain (once the dead process's lease expired).
    site.serve(scenario, Some("after_uncertain")).crashed();
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Uncertain);
    assert!(record.receipt.is_none());
    let balances = site.room().await.state.ledger().balances();
    assert_eq!(
        balances.reserved.micros() + balances.uncertain.micros(),
        reservation.micros(),
        "D2/B3: an uncertain call keeps its whole reservation"
    );
    assert!(
        !store
            .ledger(&RoomId::parse(ROOM).unwrap())
            .await
            .unwrap()
            .iter()
            .any(|row| matches!(row, LedgerEntry::Settled { op: o, .. } | LedgerEntry::Released { op: o, .. } if *o == op)),
        "nothing charged or released before the reconciler confirmed it"
    );
    assert_eq!(site.executions().len(), 1, "never replayed");
    (op, reservation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_serve_killed_after_a_reservation_recovers_the_uncertain_call_from_the_journal_and_completes()
 {
    let site = Site::new();
    let created = site.create_room(&[
        "oscar=operator",
        "sam=specialist",
        "sue=specialist",
        "rita=reviewer",
    ]);
    assert!(created.contains("owner token (olive): ar_"), "{created}");
    assert!(created.contains("operator token (oscar): ar_"), "{created}");

    let (op, _) = die_after_the_call_then_after_marking_it_uncertain(
        &site,
        "scenarios/serve-crash.toml",
        Some("Summarize how durable agent runtimes recover from crashes, with sources."),
    )
    .await;

    let mut last = site.serve("scenarios/serve-crash.toml", None);
    assert!(last.listening().is_some());
    let room = site.wait_completed(1).await;
    last.stop();

    let objective = &room.state.objectives()[0];
    let review = objective.reviews().last().unwrap();
    assert_eq!(review.reviewer().as_str(), "rita");
    assert!(review.verdicts().iter().all(|v| v.verdict == Verdict::Met));
    let closing = no_task_twice_and_the_ledger_adds_up(&site, 2_100 + 3_400 + 2_800 + 1_200).await;
    // Confirmed from the journal: charged what the journal says it cost (D2, B3).
    assert!(
        matches!(closing[&op], LedgerEntry::Settled { charged, .. } if charged == UsdMicros::new(2_100)),
        "{:?}",
        closing[&op]
    );
    let record = site.store().await.operation(op).await.unwrap().unwrap();
    assert!(
        record.receipt.is_none(),
        "its result came from the reconciler"
    );
}

/// DESIGN.md "A durable call, step by step", step 4: the receipt is written, fenced on its
/// generation, in the commit that settles the call. A `serve` killed right after that commit
/// (`after_settle`) leaves the call applied, with its receipt, and the Room settled: the next
/// process has nothing to hand over and runs nothing twice. (Written apart, the receipt alone
/// would be found receipted and unsettled here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_serve_killed_right_after_a_call_returned_finds_its_receipt_and_settlement_committed_together()
 {
    let site = Site::new();
    site.create_room(&[
        "oscar=operator",
        "sam=specialist",
        "sue=specialist",
        "rita=reviewer",
    ]);
    site.post("Summarize how durable agent runtimes recover from crashes, with sources.");
    site.serve("scenarios/serve-crash.toml", Some("after_settle"))
        .crashed();

    let store = site.store().await;
    let records = all_operations(&store).await;
    let returned: Vec<&OperationRecord> =
        records.values().filter(|r| r.receipt.is_some()).collect();
    assert_eq!(returned.len(), 1, "one call returned: {records:#?}");
    let record = returned[0];
    assert_eq!(record.request.role, CallRole::Reasoner);
    assert_eq!(
        record.status,
        OperationStatus::Applied,
        "the receipt came with its settlement: {record:?}"
    );
    let op = record.op();
    let ledger = store.ledger(&RoomId::parse(ROOM).unwrap()).await.unwrap();
    assert!(
        ledger.iter().any(
            |row| matches!(row, LedgerEntry::Settled { op: o, charged, .. }
            if *o == op && *charged == UsdMicros::new(2_100))
        ),
        "charged in the same commit: {ledger:?}"
    );
    let room = site.room().await;
    assert_eq!(
        room.state.ledger().held_by(op),
        None,
        "the Room holds nothing for it: settled"
    );

    // The same commit reserved the plan's first task, leased to the process that died: it
    // may have started before the kill (recovery then charges it from the journal) or not
    // (recovery releases it and the task is dispatched again). Either way it runs once.
    let mut last = site.serve("scenarios/serve-crash.toml", None);
    assert!(last.listening().is_some());
    let room = site.wait_completed(1).await;
    last.stop();
    let executions = site.executions();
    assert_eq!(
        executions
            .iter()
            .filter(|e| e["op"] == op.to_string())
            .count(),
        1,
        "the returned call never ran again"
    );
    let mut tasks: BTreeMap<String, usize> = BTreeMap::new();
    for e in executions.iter().filter(|e| e["role"] == "specialist") {
        *tasks
            .entry(e["task"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    assert!(
        tasks.values().all(|n| *n == 1),
        "a task ran twice: {tasks:?}"
    );
    let rows = store.ledger(&RoomId::parse(ROOM).unwrap()).await.unwrap();
    let balances = room.state.ledger().balances();
    assert_eq!(BudgetLedger::replay(&rows).unwrap().balances(), balances);
    assert_eq!(balances.reserved, UsdMicros::ZERO);
    assert_eq!(balances.uncertain, UsdMicros::ZERO);
    assert_eq!(
        balances.spent,
        UsdMicros::new(2_100 + 3_400 + 2_800 + 1_200),
        "the scenario's charges, to the micro"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_serve_killed_with_sigkill_while_a_task_call_is_uncertain_never_reruns_it_and_completes()
{
    let site = Site::new();
    site.create_room(&["sam=specialist", "sue=specialist", "rita=reviewer"]);
    // Recovery only on start, so the uncertain call stays as it is while this process lives.
    let mut first = site.serve_with(
        "scenarios/lost-reply.toml",
        None,
        &["--recover-every", "1000000"],
    );
    assert!(first.listening().is_some());
    site.post("Summarize how durable agent runtimes recover from crashes, with sources.");

    // sam ran `gather` and journaled it, but the reply was lost: uncertain, reservation held.
    let store = site.store().await;
    let deadline = Instant::now() + PATIENCE;
    let (op, reservation) = loop {
        // One status, one query: reading every status while `serve` moves operations between
        // them could see one row twice.
        let uncertain = store
            .operations(OperationFilter::Status(OperationStatus::Uncertain))
            .await
            .unwrap();
        // The operation row is marked first, then the Room decides the uncertainty (D2):
        // wait for both before the kill, so the state the restart meets is the one this test
        // is about (the crash between the two is the `after_uncertain` crash point's test).
        if let [record] = uncertain.as_slice()
            && site.room().await.state.ledger().balances().uncertain == record.request.reservation
        {
            break (record.op(), record.request.reservation);
        }
        assert!(Instant::now() < deadline, "no call became uncertain");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.request.role, CallRole::Specialist);
    assert!(task_of(&record.request.brief).unwrap().ends_with("/gather"));
    first.kill();

    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Uncertain);
    assert!(record.receipt.is_none());
    let balances = site.room().await.state.ledger().balances();
    assert_eq!(
        balances.uncertain, reservation,
        "B3: the uncertain call keeps its whole reservation"
    );
    let journaled: Vec<Value> = site
        .executions()
        .into_iter()
        .filter(|e| e["op"] == op.to_string())
        .collect();
    assert_eq!(journaled.len(), 1, "sam ran it once");

    let mut last = site.serve("scenarios/lost-reply.toml", None);
    assert!(last.listening().is_some());
    site.wait_completed(1).await;
    last.stop();
    let closing = no_task_twice_and_the_ledger_adds_up(&site, 2_100 + 3_400 + 2_800 + 1_200).await;
    // D2: confirmed from sam's journal and charged what it recorded, never run again.
    assert!(
        matches!(closing[&op], LedgerEntry::Settled { charged, .. } if charged == UsdMicros::new(3_400)),
        "{:?}",
        closing[&op]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d6_two_report_versions_reviewed_by_distinct_reviewers_complete_across_rebuilt_coordinators()
 {
    let site = Site::new();
    site.create_room(&[
        "bea=specialist,reviewer",
        "oscar=operator",
        "sam=specialist",
        "sue=specialist",
        "rita=reviewer",
    ]);
    // Persisted before any coordinator runs: the first one accepts it on start (T1).
    site.post("Summarize what changed in durable agent runtimes, with sources for every claim.");

    die_after_the_call_then_after_marking_it_uncertain(&site, "scenarios/two-reviewers.toml", None)
        .await;
    // A new process: a coordinator rebuilt from the store only.
    let mut last = site.serve("scenarios/two-reviewers.toml", None);
    assert!(last.listening().is_some());
    let room = site.wait_completed(1).await;
    last.stop();

    let objective = &room.state.objectives()[0];
    assert_eq!(objective.plans().len(), 2, "R3: a corrective plan");
    let reviews: Vec<(u32, String, bool)> = objective
        .reviews()
        .iter()
        .map(|r| {
            (
                r.report().version,
                r.reviewer().to_string(),
                r.verdicts().iter().all(|v| v.verdict == Verdict::Met),
            )
        })
        .collect();
    // R1: version 2 has bea among its authors, so another reviewer reviews it.
    assert_eq!(
        reviews,
        [(1, "bea".to_owned(), false), (2, "rita".to_owned(), true)]
    );
    no_task_twice_and_the_ledger_adds_up(
        &site,
        2_100 + 3_400 + 2_800 + 1_200 + 2_300 + 3_100 + 3_000 + 1_300,
    )
    .await;
    // O3: the unchanged research was reused by plan 2, never run again.
    let gathered = site
        .executions()
        .iter()
        .filter(|e| e["task"].as_str().is_some_and(|t| t.ends_with("/gather")))
        .count();
    assert_eq!(gathered, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b7_two_serve_processes_on_one_database_never_dispatch_a_task_twice() {
    let site = Site::new();
    site.create_room(&[
        "oscar=operator",
        "sam=specialist",
        "sue=specialist",
        "rita=reviewer",
    ]);
    let mut one = site.serve("scenarios/two-serves.toml", None);
    let mut two = site.serve("scenarios/two-serves.toml", None);
    assert!(one.listening().is_some());
    assert!(two.listening().is_some());
    // Four objectives posted at once: both processes poll for them and race to accept them.
    for topic in [
        "recover from crashes",
        "lease tool calls",
        "fence stale writers",
        "bound budgets",
    ] {
        site.post(&format!(
            "Summarize how durable agent runtimes {topic}, with sources."
        ));
    }
    let room = site.wait_completed(4).await;
    one.stop();
    two.stop();
    for objective in room.state.objectives() {
        let review = objective.reviews().last().unwrap();
        assert!(review.verdicts().iter().all(|v| v.verdict == Verdict::Met));
    }
    no_task_twice_and_the_ledger_adds_up(&site, 4 * (2_100 + 3_400 + 2_800 + 1_200)).await;
}

/// Issue 21, item 4: on PostgreSQL an owner message posted by another process reaches `serve`
/// by notification (LISTEN/NOTIFY), not by polling every Room: with the pass over every Room
/// once an hour, the posted objective is accepted and completes all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_postgresql_accepts_an_event_posted_elsewhere_by_notification() {
    let site = Site::new();
    site.create_room(&[
        "oscar=operator",
        "sam=specialist",
        "sue=specialist",
        "rita=reviewer",
    ]);
    let mut serve = site.serve_with(
        "scenarios/two-serves.toml",
        None,
        &["--fallback-ms", "3600000"],
    );
    assert!(serve.listening().is_some());
    // Posted after serve's first pass over every Room: only a notice brings it in.
    tokio::time::sleep(Duration::from_millis(500)).await;
    site.post("Summarize how durable agent runtimes recover from crashes, with sources.");
    site.wait_completed(1).await;
    serve.stop();
}

// ---- graceful stop (SIGTERM) ---------------------------------------------------------------

/// The lease of the graceful-stop tests: far longer than either test waits, so a restart that
/// classifies a call did not wait out its lease.
const LONG_LEASE_MS: &str = "60000";
const SLOW: &str = "scenarios/slow-specialist.toml";

/// Posts the objective of [`SLOW`] to a running `serve` and waits until sam's slow `gather`
/// call is running: in flight, executed and journaled, its reply still on the way.
async fn a_slow_call_running(site: &Site) -> OperationId {
    site.post("Summarize how durable agent runtimes recover from crashes, with sources.");
    let store = site.store().await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let gathering = site
            .executions()
            .into_iter()
            .find(|e| e["task"].as_str().is_some_and(|t| t.ends_with("/gather")));
        if let Some(execution) = gathering {
            let op: OperationId = execution["op"].as_str().unwrap().parse().unwrap();
            let record = store.operation(op).await.unwrap().unwrap();
            assert_eq!(record.status, OperationStatus::InFlight, "{record:?}");
            return op;
        }
        assert!(Instant::now() < deadline, "sam never started gathering");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The operations of one status.
async fn with_status(site: &Site, status: OperationStatus) -> Vec<OperationId> {
    site.store()
        .await
        .operations(OperationFilter::Status(status))
        .await
        .unwrap()
        .iter()
        .map(agentroom_ports::OperationRecord::op)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_sigterm_releases_the_lease_of_a_call_running_past_the_grace_and_the_next_serve_reconciles_it_at_once()
 {
    let site = Site::new();
    site.create_room(&["sam=specialist", "sue=specialist", "rita=reviewer"]);
    let mut first = site.serve_with(
        SLOW,
        None,
        &["--lease-ms", LONG_LEASE_MS, "--shutdown-grace", "1s"],
    );
    assert!(first.listening().is_some());
    let op = a_slow_call_running(&site).await;

    // SIGTERM while sam's reply (4 s) is on its way: the grace (1 s) runs out first.
    let took = first.stop_timed();
    assert!(
        took >= Duration::from_millis(900),
        "it did not give the call its grace: {took:?}"
    );
    let store = site.store().await;
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::InFlight, "{record:?}");
    assert!(record.receipt.is_none(), "{record:?}");
    assert!(
        record.lease_expired,
        "D3: the lease was released, 60 s early: {record:?}"
    );
    assert_eq!(record.generation, 2, "the release moved the generation on");
    assert_eq!(record.lease_owner, None);
    let held = site.room().await.state.ledger().balances();
    assert_eq!(held.reserved, record.request.reservation, "B1: still held");

    // The next process classifies it on start, long before the 60 s lease would have run out:
    // uncertain, then confirmed from sam's journal (D2), never run again.
    let mut second = site.serve_with(SLOW, None, &["--lease-ms", LONG_LEASE_MS]);
    let started = Instant::now();
    assert!(second.listening().is_some());
    loop {
        let record = store.operation(op).await.unwrap().unwrap();
        if record.status == OperationStatus::Applied {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not classified: {record:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    site.wait_completed(1).await;
    second.stop();
    let closing = no_task_twice_and_the_ledger_adds_up(&site, 2_100 + 3_400 + 2_800 + 1_200).await;
    assert!(
        matches!(closing[&op], LedgerEntry::Settled { charged, .. } if charged == UsdMicros::new(3_400)),
        "D2: charged what the journal recorded: {:?}",
        closing[&op]
    );
    let record = store.operation(op).await.unwrap().unwrap();
    assert!(
        record.receipt.is_none(),
        "its result came from the reconciler"
    );
    assert!(record.generation >= 3, "claimed by the second process");
    let journaled = site
        .executions()
        .iter()
        .filter(|e| e["op"] == op.to_string())
        .count();
    assert_eq!(journaled, 1, "sam ran it once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_sigterm_lets_a_call_that_ends_within_the_grace_record_its_receipt() {
    let site = Site::new();
    site.create_room(&["sam=specialist", "sue=specialist", "rita=reviewer"]);
    let mut first = site.serve_with(
        SLOW,
        None,
        &["--lease-ms", LONG_LEASE_MS, "--shutdown-grace", "40s"],
    );
    assert!(first.listening().is_some());
    let op = a_slow_call_running(&site).await;

    // SIGTERM while sam's reply (4 s) is on its way: it arrives within the grace (40 s), and
    // the process exits as soon as it is recorded, not at the end of the grace.
    let took = first.stop_timed();
    assert!(
        took < Duration::from_secs(30),
        "it waited out the grace: {took:?}"
    );
    let record = site.store().await.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Receipted, "{record:?}");
    assert!(record.receipt.is_some());
    assert_eq!(record.generation, 1, "never released nor claimed");
    assert!(
        with_status(&site, OperationStatus::Uncertain)
            .await
            .is_empty()
    );
    assert!(
        with_status(&site, OperationStatus::InFlight)
            .await
            .is_empty()
    );
    assert_eq!(
        site.room().await.state.ledger().balances().uncertain,
        UsdMicros::ZERO
    );

    // The next process hands the receipt to the Room (D2) and finishes; nothing was ever
    // uncertain and nothing ran twice.
    let mut second = site.serve_with(SLOW, None, &["--lease-ms", LONG_LEASE_MS]);
    assert!(second.listening().is_some());
    site.wait_completed(1).await;
    second.stop();
    let closing = no_task_twice_and_the_ledger_adds_up(&site, 2_100 + 3_400 + 2_800 + 1_200).await;
    assert!(
        matches!(closing[&op], LedgerEntry::Settled { charged, .. } if charged == UsdMicros::new(3_400)),
        "{:?}",
        closing[&op]
    );
    let record = site.store().await.operation(op).await.unwrap().unwrap();
    assert_eq!(record.generation, 1);
    assert!(record.receipt.is_some(), "applied from its own receipt");
}

// ---- Rooms created while serve runs ----------------------------------------------------------

/// The owner's token `room create` printed.
fn owner_token(created: &str) -> String {
    created
        .lines()
        .find_map(|l| l.strip_prefix("owner token (olive): "))
        .unwrap_or_else(|| panic!("no owner token in {created}"))
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_created_while_serve_runs_is_coordinated_and_served_without_a_restart() {
    let site = Site::new();
    // lab's policy names only the benchmarking capability: the host starts with that alone
    // in its catalog, and loads research and writing when annex, whose policy names them,
    // appears.
    let narrow = site.dir.path().join("policies-lab");
    std::fs::create_dir_all(narrow.join("capabilities")).unwrap();
    for file in [
        "access.toml",
        "prices.toml",
        "capabilities/benchmarking.yaml",
    ] {
        std::fs::copy(site.policies().join(file), narrow.join(file)).unwrap();
    }
    std::fs::write(
        narrow.join("room.toml"),
        "[capabilities]\nfiles = [\"capabilities/benchmarking.yaml\"]\n",
    )
    .unwrap();
    let lab = owner_token(&site.create_room_named(ROOM, &narrow, &["bea=specialist"]));
    // Without --room: every Room on the store, and those created later.
    let mut serve = Serve(
        site.serve_command("scenarios/serve-crash.toml", None, &[])
            .spawn()
            .unwrap(),
    );
    let address = serve.listening().unwrap();
    let annex = RoomId::parse("annex").unwrap();
    let (status, _) = http(
        &address,
        "GET",
        "/v1/rooms/annex/objectives",
        Some(&lab),
        "",
    );
    assert!((400..500).contains(&status), "no Room annex yet: {status}");

    let created = site.create_room_named(
        "annex",
        &site.policies(),
        &[
            "oscar=operator",
            "sam=specialist",
            "sue=specialist",
            "rita=reviewer",
        ],
    );
    let token = owner_token(&created);
    // Persisted by another process: only the host's loop can accept it (T1).
    let out = site.agentroom(&[
        "event",
        "post",
        "--room",
        "annex",
        "--as",
        "olive",
        "Summarize how durable agent runtimes recover from crashes, with sources.",
    ]);
    assert!(out.status.success(), "{out:?}");

    // The objective runs to completion in the new Room: accepted, planned against the
    // capabilities its policy names, executed, reviewed.
    let store = site.store().await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let room = held(&store, &annex).await;
        let statuses: Vec<_> = room.state.objectives().iter().map(|o| o.status()).collect();
        if statuses == [ObjectiveStatus::Completed] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new Room's objective did not complete: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = http(
        &address,
        "GET",
        "/v1/rooms/annex/objectives",
        Some(&token),
        "",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("completed"), "{body}");
    // Nobody reaches another Room: the new owner's token does not open lab, nor lab's annex.
    let (status, _) = http(
        &address,
        "GET",
        "/v1/rooms/lab/objectives",
        Some(&token),
        "",
    );
    assert!((400..500).contains(&status), "{status}");
    let (status, _) = http(
        &address,
        "GET",
        "/v1/rooms/annex/objectives",
        Some(&lab),
        "",
    );
    assert!((400..500).contains(&status), "{status}");
    serve.stop();
    // lab was coordinated all along and had nothing to do.
    assert!(site.room().await.state.objectives().is_empty());
}

// ---- logs ----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_log_format_json_writes_json_lines_with_each_requests_id() {
    let site = Site::new();
    let token =
        owner_token(&site.create_room(&["sam=specialist", "sue=specialist", "rita=reviewer"]));
    let logs = site.dir.path().join("serve.log");
    let mut command = site.serve_command(SLOW, None, &["--log-format", "json"]);
    command.stderr(std::fs::File::create(&logs).unwrap());
    let mut serve = Serve(command.spawn().unwrap());
    let address = serve.listening().unwrap();

    let (status, head, _) = http_with_head(&address, "GET", "/health", None, "");
    assert_eq!(status, 200);
    let health = request_id(&head);
    let (status, head, _) = http_with_head(
        &address,
        "GET",
        &format!("/v1/rooms/{ROOM}/objectives"),
        Some(&token),
        "",
    );
    assert_eq!(status, 200);
    let objectives = request_id(&head);
    let (status, head, _) = http_with_head(
        &address,
        "GET",
        "/v1/rooms/elsewhere/objectives",
        Some(&token),
        "",
    );
    assert!((400..500).contains(&status), "{status}");
    let refused = request_id(&head);
    assert_ne!(health, objectives);
    serve.stop();

    let text = std::fs::read_to_string(&logs).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    assert!(
        lines
            .iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string())
    );
    // Each request: one line in its span, carrying its id, method, path and status.
    for (id, path, status) in [
        (&health, "/health".to_owned(), Some(200)),
        (
            &objectives,
            format!("/v1/rooms/{ROOM}/objectives"),
            Some(200),
        ),
        (&refused, "/v1/rooms/elsewhere/objectives".to_owned(), None),
    ] {
        let finished: Vec<&Value> = lines
            .iter()
            .filter(|l| l["span"]["request_id"] == id.as_str())
            .filter(|l| l["fields"]["message"] == "request finished")
            .collect();
        assert_eq!(finished.len(), 1, "{id}: {text}");
        let line = finished[0];
        assert_eq!(line["span"]["name"], "request", "{line}");
        assert_eq!(line["span"]["method"], "GET", "{line}");
        assert_eq!(line["span"]["path"], path.as_str(), "{line}");
        let logged = line["fields"]["status"].as_u64().unwrap();
        match status {
            Some(status) => assert_eq!(logged, status, "{line}"),
            None => assert!((400..500).contains(&logged), "{line}"),
        }
    }
}

#[test]
fn serve_refuses_a_bad_log_format_or_shutdown_grace_as_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .arg("--root")
            .arg(dir.path().join("data"))
            .arg("--policies")
            .arg(repo("policies"))
            .args(args)
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .env_remove("AGENTROOM_LOG_FORMAT")
            .output()
            .unwrap()
    };
    let out = serve(&["--log-format", "yaml"]);
    refused(&out, 2, "invalid value 'yaml' for '--log-format <FORMAT>'");
    refused(&out, 2, "[possible values: text, json]");
    for (grace, message) in [
        ("10x", "`10x` is not a duration"),
        ("soon", "`soon` is not a duration"),
        ("-1s", "`-1s` is not a duration"),
        ("2h", "`2h` is longer than an hour"),
        ("61m", "`61m` is longer than an hour"),
        ("0s", "`0s` is zero"),
    ] {
        let arg = format!("--shutdown-grace={grace}");
        refused(&serve(&[arg.as_str()]), 2, message);
    }
    for (flag, value, message) in [
        ("--provider-wait", "soon", "`soon` is not a duration"),
        ("--provider-wait", "0m", "`0m` is zero"),
        ("--uncertain-hold", "1y", "`1y` is not a duration"),
    ] {
        let arg = format!("{flag}={value}");
        refused(&serve(&[arg.as_str()]), 2, message);
    }
    assert!(
        !dir.path().join("data").exists(),
        "a usage error creates nothing"
    );
}

// ---- bad input: exit code, message, nothing written ----------------------------------------

/// The Room's revision and ledger, and the number of persisted events and tokens: what a
/// refused command must leave as it was.
async fn footprint(site: &Site) -> (Option<i64>, usize, String) {
    let store = site.store().await;
    let room = RoomId::parse(ROOM).unwrap();
    let revision = store.load(&room).await.unwrap().map(|r| r.revision.0);
    let ledger = store.ledger(&room).await.unwrap().len();
    let out = Command::new("psql")
        .args([site.url().as_str(), "-X", "-q", "-A", "-t", "-c"])
        .arg("SELECT (SELECT count(*) FROM rooms) || ' rooms ' || (SELECT count(*) FROM room_events) || ' events ' || (SELECT count(*) FROM access_tokens) || ' tokens'")
        .output()
        .unwrap();
    (
        revision,
        ledger,
        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
    )
}

fn refused(out: &Output, code: i32, message: &str) {
    assert_eq!(out.status.code(), Some(code), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(message), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_create_refuses_bad_input_and_writes_nothing() {
    let site = Site::new();
    let policies = site.policies();
    let policies = policies.to_str().unwrap();
    let create = |extra: &[&str], policies: &str| {
        let mut args = vec![
            "room",
            "create",
            "--room",
            ROOM,
            "--owner",
            "olive",
            "--policies",
            policies,
        ];
        args.extend(extra);
        if !extra.iter().any(|a| a.starts_with("--limit-micros")) {
            args.extend(["--limit-micros", "1000"]);
        }
        site.agentroom(&args)
    };
    let empty = footprint(&site).await;
    assert_eq!(empty.2, "0 rooms 0 events 0 tokens");

    refused(
        &create(&["--member", "sam=wizard"], policies),
        2,
        "`wizard` is not a role (owner, operator, reviewer, specialist, agent_host)",
    );
    refused(
        &create(&["--member", "sam"], policies),
        2,
        "is not PRINCIPAL=ROLE",
    );
    refused(
        &create(&["--model", "gpt-nothing"], policies),
        1,
        "--model gpt-nothing",
    );
    refused(
        &create(&["--limit-micros=-5"], policies),
        1,
        "--limit-micros -5: a budget limit cannot be negative",
    );
    // A bad Room policy: file, line and field.
    let bad = tempfile::tempdir().unwrap();
    for file in ["access.toml", "prices.toml"] {
        std::fs::copy(site.policies().join(file), bad.path().join(file)).unwrap();
    }
    std::fs::write(bad.path().join("room.toml"), "[bounds]\nreplans = 3\n").unwrap();
    refused(
        &create(&[], bad.path().to_str().unwrap()),
        1,
        "room.toml: line 2, column 1, field `bounds.replans`",
    );
    // A capability file it names that is not valid: named with its problem.
    std::fs::write(
        bad.path().join("room.toml"),
        "[capabilities]\nfiles = [\"caps.yaml\"]\n",
    )
    .unwrap();
    std::fs::write(bad.path().join("caps.yaml"), "kind: Capability\n").unwrap();
    refused(&create(&[], bad.path().to_str().unwrap()), 1, "caps.yaml");
    assert_eq!(footprint(&site).await, empty, "nothing was written");

    let ok = create(&["--member", "oscar=operator"], policies);
    assert!(ok.status.success(), "{ok:?}");
    let made = footprint(&site).await;
    assert_eq!(made.2, "1 rooms 0 events 2 tokens");
    refused(
        &create(&["--member", "oscar=operator"], policies),
        1,
        "room lab exists already; nothing changed",
    );
    assert_eq!(footprint(&site).await, made, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_post_and_serve_refuse_unknown_rooms_and_strangers_and_write_nothing() {
    let site = Site::new();
    site.create_room(&["sam=specialist"]);
    let before = footprint(&site).await;
    refused(
        &site.agentroom(&["event", "post", "--room", "nope", "--as", "olive", "hello"]),
        1,
        "no room nope: create it with `agentroom room create`; nothing was posted",
    );
    refused(
        &site.agentroom(&["event", "post", "--room", ROOM, "--as", "mallory", "hello"]),
        1,
        "mallory is not a member of room lab; nothing was posted",
    );
    refused(
        &site.agentroom(&["event", "post", "--room", ROOM, "--as", "olive", "  "]),
        1,
        "the message is empty; nothing was posted",
    );
    refused(
        &site.agentroom(&[
            "event",
            "post",
            "--room",
            "Not A Room",
            "--as",
            "olive",
            "hi",
        ]),
        2,
        "--room",
    );
    assert_eq!(footprint(&site).await, before, "nothing was written");

    let out = Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(["serve", "--listen", "127.0.0.1:0", "--room", "nope"])
        .args(["--database-url", &site.url()])
        .arg("--policies")
        .arg(site.policies())
        .env_remove("AGENTROOM_DATABASE_URL")
        .output()
        .unwrap();
    refused(
        &out,
        1,
        "no room nope: create it with `agentroom room create`",
    );
    assert_eq!(footprint(&site).await, before, "nothing was written");

    // A member's message is persisted and its id printed; nothing accepts it yet.
    let id = site.post("hello");
    let store = site.store().await;
    let pending = store
        .unaccepted_events(&RoomId::parse(ROOM).unwrap(), 10)
        .await
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id.to_string(), id);
    assert_eq!(pending[0].author.as_str(), "olive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_the_embedded_database_accepts_a_posted_event_and_completes_it() {
    use agentroom_store_sqlite::{Durability, SqliteRooms};

    // The PostgreSQL site only lends its policy folder; everything else is under --root.
    let site = Site::new();
    let root = tempfile::tempdir().unwrap();
    let root_arg = root.path().to_str().unwrap().to_owned();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(args)
            .args(["--root", &root_arg])
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_CRASH_AT")
            .output()
            .unwrap()
    };
    let policies = site.policies();
    let created = run(&[
        "room",
        "create",
        "--room",
        ROOM,
        "--owner",
        "olive",
        "--limit-micros",
        "1000000",
        "--policies",
        policies.to_str().unwrap(),
        "--member",
        "sam=specialist",
        "--member",
        "sue=specialist",
        "--member",
        "rita=reviewer",
    ]);
    assert!(created.status.success(), "{created:?}");
    let stdout = String::from_utf8_lossy(&created.stdout);
    assert!(stdout.contains("owner token (olive): ar_"), "{stdout}");
    assert!(!stdout.contains("operator token"), "no operator: {stdout}");
    let owner_token = stdout
        .lines()
        .find_map(|l| l.strip_prefix("owner token (olive): "))
        .unwrap()
        .trim()
        .to_owned();

    let mut serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(["serve", "--listen", "127.0.0.1:0", "--room", ROOM])
            .args(["--root", &root_arg])
            .arg("--policies")
            .arg(&policies)
            .arg("--agents")
            .arg(repo("scenarios/serve-crash.toml"))
            .args(["--poll-ms", "50"])
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_CRASH_AT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let address = serve.listening().unwrap();
    let posted = run(&[
        "event",
        "post",
        "--room",
        ROOM,
        "--as",
        "olive",
        "Summarize how durable agent runtimes recover from crashes, with sources.",
    ]);
    assert!(posted.status.success(), "{posted:?}");

    let store =
        SqliteRooms::open(&root.path().join("planning.db"), Durability::ProcessCrash).unwrap();
    let room = RoomId::parse(ROOM).unwrap();
    let deadline = Instant::now() + PATIENCE;
    let stored = loop {
        let stored = held(&store, &room).await;
        if stored
            .state
            .objectives()
            .first()
            .is_some_and(|o| o.status() == ObjectiveStatus::Completed)
        {
            break stored;
        }
        assert!(Instant::now() < deadline, "the objective did not complete");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The host `serve` composes: the REST API behind the token `room create` printed, the A2E
    // transport behind tokens too (no --anonymous-planning), the board and /metrics.
    let objectives = format!("/v1/rooms/{ROOM}/objectives");
    let (status, body) = http(&address, "GET", &objectives, Some(&owner_token), "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"completed\""), "{body}");
    let (status, _) = http(&address, "GET", &objectives, None, "");
    assert_eq!(status, 401, "the REST API needs a token");
    let (status, _) = http(
        &address,
        "GET",
        "/v1/rooms/elsewhere/objectives",
        Some(&owner_token),
        "",
    );
    assert_eq!(status, 404, "a token never reaches another Room");
    let (status, _) = http(&address, "POST", "/v1/planning", None, "{}");
    assert_eq!(
        status, 401,
        "the planning messages need a token unless --anonymous-planning"
    );
    let (status, body) = http(&address, "GET", "/", None, "");
    assert_eq!(status, 200, "the board: {body}");
    // Not public (issue 17): it needs a token that may read operations.
    let (status, body) = http(&address, "GET", "/metrics", None, "");
    assert_eq!(status, 401, "{body}");
    serve.stop();
    let balances = stored.state.ledger().balances();
    assert_eq!(
        balances.spent,
        UsdMicros::new(2_100 + 3_400 + 2_800 + 1_200)
    );
    assert_eq!(balances.reserved, UsdMicros::ZERO);
    // The journal defaults to the data directory.
    assert!(root.path().join("scripted-journal.jsonl").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_to_start_when_a_capability_file_of_the_room_policy_is_bad() {
    let site = Site::new();
    site.create_room(&["sam=specialist"]);
    // The Room policy names capabilities/research.yaml; it went bad after the Room was made.
    std::fs::write(
        site.policies().join("capabilities/research.yaml"),
        "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata:\n  name: research\n  namespace: default\nspec:\n  description: Find sources\n  displayName: 42\n",
    )
    .unwrap();
    let before = footprint(&site).await;
    let out = Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(["serve", "--listen", "127.0.0.1:0", "--room", ROOM])
        .args(["--database-url", &site.url()])
        .arg("--policies")
        .arg(site.policies())
        .env_remove("AGENTROOM_DATABASE_URL")
        .output()
        .unwrap();
    refused(
        &out,
        1,
        "capabilities/research.yaml: document 1, line 8, column 16, field `spec.displayName`",
    );
    assert_eq!(footprint(&site).await, before, "nothing was written");
}

#[test]
fn serve_refuses_a_bad_agents_configuration_before_it_listens() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |flag: &str, file: &Path| {
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .arg("--root")
            .arg(dir.path().join("data"))
            .arg("--policies")
            .arg(repo("policies"))
            .arg(flag)
            .arg(file)
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_TEST_UNSET_KEY")
            .output()
            .unwrap()
    };
    let config = dir.path().join("openai.toml");
    std::fs::write(
        &config,
        "base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"scripted\"\ntemperature = 2\n",
    )
    .unwrap();
    refused(
        &serve("--openai", &config),
        1,
        "unknown field `temperature`",
    );
    std::fs::write(
        &config,
        "base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"scripted\"\napi_key_env = \"AGENTROOM_TEST_UNSET_KEY\"\n",
    )
    .unwrap();
    refused(
        &serve("--openai", &config),
        1,
        "the API key variable `AGENTROOM_TEST_UNSET_KEY` (api_key_env) is not set",
    );
    std::fs::write(&config, "model = \"scripted\"\n").unwrap();
    refused(&serve("--openai", &config), 1, "missing field `base_url`");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(&scenario, "description = \"x\"\n[[reasoner]]\nnope = 1\n").unwrap();
    let out = serve("--agents", &scenario);
    refused(&out, 1, "TOML parse error at line 3, column 1");
    refused(&out, 1, "unknown field `nope`");
    refused(
        &serve("--agents", &dir.path().join("missing.toml")),
        1,
        "missing.toml: No such file or directory",
    );
}
