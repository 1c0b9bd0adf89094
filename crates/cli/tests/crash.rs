//! Crash tests (issue 4, D2, D6): the real `agentroom` binary runs durable calls with
//! `agentroom drill durable-call`, dies at a named crash point (`AGENTROOM_CRASH_AT`, an abort)
//! or by a SIGKILL from the test while a call is in flight, and a new process recovers. The
//! database and the provider's own execution log must then show: no operation created twice,
//! no call executed twice, nothing left in flight, every call without a receipt marked
//! uncertain and reconciled from the provider's record (charged if it ran, released if not),
//! and a ledger that replays to the stored balances with nothing held.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentroom_ports::domain::ids::{OperationId, RoomId};
use agentroom_ports::domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::{
    OperationFilter, OperationRecord, OperationStatus, RoomStore, WorkflowStore,
};
use agentroom_store_sqlite::{Durability, SqliteRooms};
use serde_json::Value;

const SIGABRT: i32 = 6;
const SIGKILL: i32 = 9;
const LEASE_MS: &str = "200";

fn drill(root: &Path, crash_at: Option<&str>, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
    command
        .args(["drill", "durable-call", "--lease-ms", LEASE_MS, "--root"])
        .arg(root)
        .args(args)
        .env_remove("AGENTROOM_CRASH_AT")
        .env_remove("AGENTROOM_LOG");
    if let Some(point) = crash_at {
        command.env("AGENTROOM_CRASH_AT", point);
    }
    command
}

/// Runs the drill to a crash at `point` and checks that the process died of it.
fn crash_at(root: &Path, point: &str, args: &[&str]) {
    let out = drill(root, Some(point), args).output().unwrap();
    assert!(
        !out.status.success(),
        "{point}: the process exited 0: {out:?}"
    );
    assert_eq!(
        out.status.signal(),
        Some(SIGABRT),
        "{point}: the process did not abort: {out:?}"
    );
    assert!(
        out.stdout.is_empty(),
        "{point}: a crashed run printed a summary"
    );
}

/// Runs the drill to its end (recovery first) and returns its summary.
fn restart(root: &Path, args: &[&str]) -> Value {
    let out: Output = drill(root, None, args).output().unwrap();
    assert!(out.status.success(), "the restart failed: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ops(summary: &Value, field: &str) -> Vec<OperationId> {
    summary["recovery"][field]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().parse().unwrap())
        .collect()
}

/// What the database and the provider's log hold after a run.
struct Facts {
    records: BTreeMap<OperationId, OperationRecord>,
    executed: BTreeSet<OperationId>,
    /// The ledger entry that closed each closed operation: settled or released.
    closing: BTreeMap<OperationId, LedgerEntry>,
}

impl Facts {
    fn record(&self, op: OperationId) -> &OperationRecord {
        &self.records[&op]
    }

    fn charged(&self, op: OperationId) -> Option<UsdMicros> {
        match self.closing.get(&op)? {
            LedgerEntry::Settled { charged, .. } => Some(*charged),
            LedgerEntry::Released { .. } => Some(UsdMicros::ZERO),
            _ => None,
        }
    }
}

/// Reads the database and the execution log and checks every invariant that holds after any
/// crash and a recovery.
async fn invariants(root: &Path) -> Facts {
    let store = SqliteRooms::open(&root.join("planning.db"), Durability::ProcessCrash).unwrap();
    let room = RoomId::parse("local").unwrap();
    let stored = store.load(&room).await.unwrap().unwrap();

    let mut all = Vec::new();
    for status in [
        OperationStatus::InFlight,
        OperationStatus::Receipted,
        OperationStatus::Applied,
        OperationStatus::Uncertain,
        OperationStatus::DeadLetter,
        OperationStatus::Resolved,
    ] {
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

    // No operation created twice: one row per reservation in the ledger and in the state.
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
    // Everything closed: the live state holds no operation.
    assert!(
        stored.state.operations().is_empty(),
        "open operations remain: {:?}",
        stored.state.operations()
    );
    let closing: BTreeMap<OperationId, LedgerEntry> = rows
        .iter()
        .filter_map(|e| match e {
            LedgerEntry::Settled { op, .. } | LedgerEntry::Released { op, .. } => {
                Some((*op, e.clone()))
            }
            _ => None,
        })
        .collect();

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
    let spent = facts
        .records
        .keys()
        .map(|op| facts.charged(*op).unwrap().micros())
        .sum::<i64>();
    assert_eq!(balances.spent, UsdMicros::new(spent));
    facts
}

/// The one operation recovery found without a receipt.
fn the_recovered(summary: &Value) -> OperationId {
    let claimed = ops(summary, "claimed");
    assert_eq!(claimed.len(), 1, "{summary}");
    assert_eq!(ops(summary, "reconciled"), claimed, "{summary}");
    claimed[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_killed_after_reserve_the_call_never_ran_and_is_released_not_replayed() {
    let root = tempfile::tempdir().unwrap();
    restart(root.path(), &["--calls", "2"]);
    crash_at(root.path(), "after_reserve", &["--calls", "2"]);
    let summary = restart(root.path(), &["--calls", "1"]);
    let op = the_recovered(&summary);
    let facts = invariants(root.path()).await;
    assert!(
        !facts.executed.contains(&op),
        "the reserved call was called"
    );
    assert!(facts.record(op).receipt.is_none());
    assert_eq!(facts.charged(op), Some(UsdMicros::ZERO));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_killed_after_the_call_it_is_uncertain_then_charged_from_the_providers_record() {
    let root = tempfile::tempdir().unwrap();
    crash_at(root.path(), "after_call", &["--calls", "2"]);
    let summary = restart(root.path(), &["--calls", "1"]);
    let op = the_recovered(&summary);
    let facts = invariants(root.path()).await;
    assert!(facts.executed.contains(&op), "it ran before the crash");
    assert!(facts.record(op).receipt.is_none(), "its result was lost");
    assert_eq!(facts.charged(op), Some(UsdMicros::new(1_000)));
    assert_eq!(facts.record(op).recovery_attempts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_killed_after_the_receipt_recovery_hands_it_to_the_owner() {
    let root = tempfile::tempdir().unwrap();
    crash_at(
        root.path(),
        "after_receipt",
        &["--calls", "2", "--path", "runner"],
    );
    let summary = restart(root.path(), &["--calls", "1", "--path", "runner"]);
    let delivered = ops(&summary, "delivered");
    assert_eq!(delivered.len(), 1, "{summary}");
    assert!(ops(&summary, "claimed").is_empty(), "{summary}");
    let facts = invariants(root.path()).await;
    let op = delivered[0];
    assert!(facts.executed.contains(&op));
    assert!(facts.record(op).receipt.is_some());
    assert_eq!(facts.charged(op), Some(UsdMicros::new(400)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d6_killed_after_settle_recovery_finds_nothing_and_repeats_nothing() {
    let root = tempfile::tempdir().unwrap();
    crash_at(root.path(), "after_settle", &["--calls", "2"]);
    let before = invariants(root.path()).await;
    assert_eq!(
        before.records.len(),
        1,
        "it died after the first call settled"
    );
    let summary = restart(root.path(), &["--calls", "1"]);
    for field in ["delivered", "claimed", "reconciled", "uncertain", "live"] {
        assert!(ops(&summary, field).is_empty(), "{field}: {summary}");
    }
    let facts = invariants(root.path()).await;
    assert_eq!(facts.records.len(), 2);
    assert_eq!(facts.executed.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_killed_during_recovery_after_the_claim_the_next_recovery_finishes_it() {
    let root = tempfile::tempdir().unwrap();
    crash_at(root.path(), "after_call", &["--calls", "1"]);
    crash_at(root.path(), "after_claim", &["--calls", "1"]);
    let summary = restart(root.path(), &["--calls", "0"]);
    let op = the_recovered(&summary);
    let facts = invariants(root.path()).await;
    assert!(facts.executed.contains(&op));
    assert_eq!(facts.charged(op), Some(UsdMicros::new(1_000)));
    assert_eq!(facts.record(op).recovery_attempts, 2, "both claims counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_killed_during_recovery_after_marking_uncertain_the_next_recovery_reconciles() {
    let root = tempfile::tempdir().unwrap();
    crash_at(root.path(), "after_reserve", &["--calls", "1"]);
    crash_at(root.path(), "after_uncertain", &["--calls", "1"]);
    let summary = restart(root.path(), &["--calls", "0"]);
    let reconciled = ops(&summary, "reconciled");
    assert_eq!(reconciled.len(), 1, "{summary}");
    assert!(
        ops(&summary, "claimed").is_empty(),
        "claimed before the crash"
    );
    let op = reconciled[0];
    let facts = invariants(root.path()).await;
    assert!(
        !facts.executed.contains(&op),
        "an uncertain call was replayed"
    );
    assert_eq!(facts.charged(op), Some(UsdMicros::ZERO));
    assert_eq!(facts.record(op).recovery_attempts, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_a_sigkill_while_a_slow_call_is_in_flight_leaves_it_uncertain_then_released() {
    let root = tempfile::tempdir().unwrap();
    restart(root.path(), &["--calls", "1"]);
    let mut child = drill(root.path(), None, &["--calls", "1", "--call-ms", "20000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let store =
        SqliteRooms::open(&root.path().join("planning.db"), Durability::ProcessCrash).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let op = loop {
        let in_flight = store
            .operations(OperationFilter::Status(OperationStatus::InFlight))
            .await
            .unwrap();
        if let Some(record) = in_flight.first() {
            break record.op();
        }
        assert!(Instant::now() < deadline, "no call went in flight");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Let it heartbeat past its first lease, so only the kill ends it.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::InFlight);
    assert!(
        !record.lease_expired,
        "the heartbeat keeps the lease: {record:?}"
    );
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(SIGKILL), "{status:?}");
    drop(store);

    let summary = restart(root.path(), &["--calls", "1"]);
    assert_eq!(the_recovered(&summary), op);
    let facts = invariants(root.path()).await;
    assert!(
        !facts.executed.contains(&op),
        "the killed call was called again"
    );
    assert_eq!(facts.charged(op), Some(UsdMicros::ZERO));
}
