//! Shared support of the CLI's crash and fault tests, the same for every store: where a drill
//! keeps its data ([`Site`]: the embedded file, a fresh database on the shared PostgreSQL
//! server, or a private cluster's), running the real `agentroom drill durable-call` to a crash
//! or to its end, and the D2 invariants read back from the database and the provider's own
//! execution log ([`Site::invariants`]); and, in [`model`], the processes of the tests that
//! run agentroom with a model (`agentroom-testmodel`, `serve --openai`).
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support; each test binary uses a different part of it"
)]

pub mod cluster;
pub mod database;
pub mod model;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};

use agentroom_ports::domain::ids::{OperationId, RoomId};
use agentroom_ports::domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::{
    OperationFilter, OperationRecord, OperationStatus, Revision, RoomStore, WorkflowStore,
};
use agentroom_store_postgres::PgRooms;
use agentroom_store_sqlite::{Durability, SqliteRooms};
use serde_json::Value;
use tempfile::TempDir;

pub use database::Database;

/// A TCP port on 127.0.0.1 that was free when asked (bound, read, released) and that this
/// test process has not handed out before: tests of one binary run in parallel, and the
/// kernel may give a just-released port to the next `bind(0)` before the first test's child
/// process has bound it.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<BTreeSet<u16>> = std::sync::Mutex::new(BTreeSet::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if given.insert(port) {
            return port;
        }
    }
}

pub const SIGKILL: i32 = 9;
/// The drill's lease in the crash tests: short, so a restart waits little for a dead
/// process's leases.
pub const LEASE_MS: &str = "200";

/// Every operation status, for reading all rows back.
pub const STATUSES: [OperationStatus; 6] = [
    OperationStatus::InFlight,
    OperationStatus::Receipted,
    OperationStatus::Applied,
    OperationStatus::Uncertain,
    OperationStatus::DeadLetter,
    OperationStatus::Resolved,
];

/// Both stores' ports, behind one object.
pub trait Stores: RoomStore + WorkflowStore {}

impl<S: RoomStore + WorkflowStore> Stores for S {}

/// Where a drill keeps its data: the root (the execution log, and the embedded database when
/// there is no URL) and, on PostgreSQL, a migrated database.
pub struct Site {
    root: TempDir,
    url: Option<String>,
    /// Dropped after the test: the shared server's database it made.
    _database: Option<Database>,
}

impl Site {
    /// The embedded SQLite file under a fresh root (the drill creates it).
    pub fn sqlite() -> Site {
        Site {
            root: tempfile::tempdir().unwrap(),
            url: None,
            _database: None,
        }
    }

    /// A fresh database on the shared server, migrated by `agentroom migrate up` (the drill
    /// never migrates PostgreSQL, D5), dropped when the site is.
    pub fn postgres() -> Site {
        let database = Database::create();
        let site = Site::on(database.url());
        Site {
            _database: Some(database),
            ..site
        }
    }

    /// An existing database (e.g. a private cluster's), migrated here.
    pub fn on(url: String) -> Site {
        migrate_up(&url);
        Site {
            root: tempfile::tempdir().unwrap(),
            url: Some(url),
            _database: None,
        }
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// `agentroom drill durable-call` on this site, crashing at `crash_at` if given.
    pub fn drill(&self, crash_at: Option<&str>, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
        command
            .args(["drill", "durable-call", "--root"])
            .arg(self.root())
            .env_remove("AGENTROOM_CRASH_AT")
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG");
        if let Some(url) = &self.url {
            command.args(["--database-url", url]);
        }
        if !args.contains(&"--lease-ms") {
            command.args(["--lease-ms", LEASE_MS]);
        }
        command.args(args);
        if let Some(point) = crash_at {
            command.env("AGENTROOM_CRASH_AT", point);
        }
        command
    }

    /// Runs the drill to a crash at `point` and checks that the process died of it.
    pub fn crash_at(&self, point: &str, args: &[&str]) {
        let out = self.drill(Some(point), args).output().unwrap();
        assert!(
            !out.status.success(),
            "{point}: the process exited 0: {out:?}"
        );
        assert_eq!(
            out.status.signal(),
            Some(SIGKILL),
            "{point}: the process was not killed: {out:?}"
        );
        assert!(
            out.stdout.is_empty(),
            "{point}: a crashed run printed a summary"
        );
    }

    /// Runs the drill to its end (recovery first) and returns its summary.
    pub fn restart(&self, args: &[&str]) -> Value {
        let out: Output = self.drill(None, args).output().unwrap();
        assert!(out.status.success(), "the restart failed: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The site's store, opened as another process would.
    pub async fn open(&self) -> Box<dyn Stores> {
        match &self.url {
            Some(url) => Box::new(PgRooms::connect(url).await.unwrap()),
            None => Box::new(
                SqliteRooms::open(&self.root().join("planning.db"), Durability::ProcessCrash)
                    .unwrap(),
            ),
        }
    }

    /// How many owner messages the drill's Room accepted (history rows that accepted an
    /// event).
    pub async fn accepted_messages(&self) -> usize {
        let store = self.open().await;
        let room = RoomId::parse("local").unwrap();
        let rows = store.history(&room, Revision(0), 100_000).await.unwrap();
        rows.iter().filter(|row| row.event.is_some()).count()
    }

    /// Reads the database and the execution log and checks every invariant that holds after
    /// any crash and a recovery.
    pub async fn invariants(&self) -> Facts {
        let store = self.open().await;
        invariants(&*store, self.root()).await
    }
}

/// A child process that is killed when the guard drops (a failed test leaves none behind).
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `agentroom ARGS` with none of the environment a developer may have set (host, Room,
/// token, database, crash point, log filter).
pub fn agentroom(args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_agentroom"));
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

/// `agentroom migrate up --database-url URL`.
pub fn migrate_up(url: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(["migrate", "up", "--database-url", url])
        .env_remove("AGENTROOM_DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "migrate up failed: {out:?}");
}

/// The operations a summary's recovery report lists under `field`.
pub fn ops(summary: &Value, field: &str) -> Vec<OperationId> {
    ops_in(&summary["recovery"], field)
}

/// The operations a recovery report (`recovery` or `final_recovery`) lists under `field`.
pub fn ops_in(report: &Value, field: &str) -> Vec<OperationId> {
    report[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in {report}"))
        .iter()
        .map(|v| v.as_str().unwrap().parse().unwrap())
        .collect()
}

/// The one operation recovery found without a receipt.
pub fn the_recovered(summary: &Value) -> OperationId {
    let claimed = ops(summary, "claimed");
    assert_eq!(claimed.len(), 1, "{summary}");
    assert_eq!(ops(summary, "reconciled"), claimed, "{summary}");
    claimed[0]
}

/// What the database and the provider's log hold after a run.
pub struct Facts {
    pub records: BTreeMap<OperationId, OperationRecord>,
    pub executed: BTreeSet<OperationId>,
    /// The ledger row that closed each closed operation: settled or released.
    pub closing: BTreeMap<OperationId, LedgerEntry>,
    pub revision: Revision,
}

impl Facts {
    pub fn record(&self, op: OperationId) -> &OperationRecord {
        &self.records[&op]
    }

    /// What the operation was charged, once closed.
    pub fn charged(&self, op: OperationId) -> Option<UsdMicros> {
        match self.closing.get(&op)? {
            LedgerEntry::Settled { charged, .. } => Some(*charged),
            LedgerEntry::Released { .. } => Some(UsdMicros::ZERO),
            _ => None,
        }
    }
}

/// Every operation row, each once.
pub async fn all_operations(store: &dyn Stores) -> BTreeMap<OperationId, OperationRecord> {
    let mut all = Vec::new();
    for status in STATUSES {
        all.extend(
            store
                .operations(OperationFilter::Status(status))
                .await
                .unwrap(),
        );
    }
    let count = all.len();
    let records: BTreeMap<OperationId, OperationRecord> =
        all.into_iter().map(|r| (r.op(), r)).collect();
    assert_eq!(records.len(), count, "an operation row appears twice");
    records
}

/// The invariants of D2 (and D1, B3) after any crash or fault and a recovery, for any store,
/// read from the operation rows, the ledger rows and the provider's log: no operation created
/// twice or lost, no call executed twice, nothing left open, every call without a receipt
/// reconciled from the provider's record (charged if it ran, released if not), ledger rows
/// that replay to the stored balances with nothing held, and a history that rebuilds every
/// revision.
pub async fn invariants(store: &dyn Stores, root: &Path) -> Facts {
    let room = RoomId::parse("local").unwrap();
    let stored = store.load(&room).await.unwrap().unwrap();
    let records = all_operations(store).await;

    // No operation created twice or lost: one row per reservation in the ledger.
    let rows = store.ledger(&room).await.unwrap();
    let reserved: Vec<OperationId> = rows
        .iter()
        .filter_map(|e| match e {
            LedgerEntry::Reserved { op, .. } => Some(*op),
            _ => None,
        })
        .collect();
    let distinct: BTreeSet<OperationId> = reserved.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        reserved.len(),
        "a reservation was made twice"
    );
    assert_eq!(
        distinct,
        records.keys().copied().collect::<BTreeSet<_>>(),
        "operation rows and ledger reservations differ"
    );
    let mut closing = BTreeMap::new();
    for entry in &rows {
        if let LedgerEntry::Settled { op, .. } | LedgerEntry::Released { op, .. } = entry {
            let before = closing.insert(*op, entry.clone());
            assert!(
                before.is_none(),
                "{op} was closed twice: {before:?}, {entry:?}"
            );
        }
    }

    // No call executed twice, and none that has no row.
    let log = std::fs::read_to_string(root.join("executions.log")).unwrap_or_default();
    let lines: Vec<OperationId> = log.lines().map(|l| l.parse().unwrap()).collect();
    let executed: BTreeSet<OperationId> = lines.iter().copied().collect();
    assert_eq!(
        executed.len(),
        lines.len(),
        "a call was executed twice: {log}"
    );
    assert!(executed.is_subset(&distinct), "an executed call has no row");

    let facts = Facts {
        records,
        executed,
        closing,
        revision: stored.revision,
    };
    for (op, record) in &facts.records {
        // Nothing left in flight, receipted, uncertain or dead-lettered: all applied.
        assert_eq!(record.status, OperationStatus::Applied, "{op}: {record:?}");
        let closing = facts
            .closing
            .get(op)
            .unwrap_or_else(|| panic!("{op} still holds its reservation"));
        if facts.executed.contains(op) {
            let LedgerEntry::Settled {
                reserved, charged, ..
            } = *closing
            else {
                panic!("{op} ran but was not settled: {closing:?}");
            };
            match &record.receipt {
                // The provider's answer: actual usage charged, the rest released (B3).
                Some(_) => assert_eq!(charged, UsdMicros::new(400), "{op}"),
                // Ran, result lost: reconciled and charged its whole reservation (B3).
                None => assert_eq!(charged, reserved, "{op}"),
            }
        } else {
            // Never ran: no receipt, released without charge, never called afterwards.
            assert!(record.receipt.is_none(), "{op} has a receipt but never ran");
            assert!(
                matches!(closing, LedgerEntry::Released { .. }),
                "{op} never ran but was charged: {closing:?}"
            );
        }
    }

    // The ledger rows replay to the stored balances, with nothing held.
    let replayed = BudgetLedger::replay(&rows).unwrap().balances();
    let balances = stored.state.ledger().balances();
    assert_eq!(replayed, balances);
    assert_eq!(balances.reserved, UsdMicros::ZERO);
    assert_eq!(balances.uncertain, UsdMicros::ZERO);
    // Everything closed: the live state holds no operation.
    assert!(
        stored.state.operations().is_empty(),
        "open operations remain: {:?}",
        stored.state.operations()
    );
    let spent = facts
        .records
        .keys()
        .map(|op| facts.charged(*op).unwrap().micros())
        .sum::<i64>();
    assert_eq!(balances.spent, UsdMicros::new(spent));

    // D1: the history has no gap; every revision rebuilds, the last one to the stored state.
    for revision in Revision::FIRST.0..=stored.revision.0 {
        let state = store
            .state_at(&room, Revision(revision))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("revision {revision} cannot be rebuilt"));
        if revision == stored.revision.0 {
            assert_eq!(state, stored.state, "the last revision rebuilds otherwise");
        }
    }
    facts
}

/// What a command printed on stdout; fails the test with its output when it did not succeed.
pub fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}
