//! The invariants a chaos run must leave, read only from the durable store (the ports, as any
//! other process would open it) and the scripted agents' journal (what they executed, synced
//! before each call returned): nothing here trusts what the killed processes said.
//!
//! - no task executed twice (D2): each operation at most once in the journal, each task
//!   identity executed by at most one operation, and no execution without its operation row;
//! - every accepted revision present (D1): the history rebuilds every revision, the last one to
//!   the stored state, and every owner message answered 2xx is persisted, accepted and became
//!   an objective (or is still being interpreted) (T1);
//! - the ledger replays to its balances (B1..B3): replayed rows = stored balances, limit =
//!   spent + reserved + available, spent = the settled charges, reserved (uncertain) = the
//!   holds of the open (uncertain) operations, one reservation per operation row and at most
//!   one closing row per operation; a call that ran is never released without charge and one
//!   that never ran is never charged;
//! - every in-flight call receipted or uncertain with its reservation (D2, B3): a closed row
//!   (applied, resolved) has its closing ledger row and is no longer open; an open row (never
//!   in flight after recovery) is open in the Room with its reservation held;
//! - every objective completed or waiting with a reason: an objective planning or running has
//!   an open call; waiting for the owner, paused or stopped for attention name their reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agentroom_domain::ids::{EventId, OperationId, RoomId};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::state::OperationState;
use agentroom_ports::{
    OperationFilter, OperationRecord, OperationStatus, Revision, RoomStore, StoredRoom,
    WorkflowStore,
};
use anyhow::Context;
use serde_json::Value;

/// Both stores' ports behind one object.
pub(crate) trait Stores: RoomStore + WorkflowStore {}

impl<S: RoomStore + WorkflowStore> Stores for S {}

const STATUSES: [OperationStatus; 6] = [
    OperationStatus::InFlight,
    OperationStatus::Receipted,
    OperationStatus::Applied,
    OperationStatus::Uncertain,
    OperationStatus::DeadLetter,
    OperationStatus::Resolved,
];

/// What the checks found: the counts of the report and one line per violation.
#[derive(Debug, Default, Clone)]
pub struct Findings {
    /// Executions in the journal.
    pub executions: usize,
    /// Operation rows.
    pub operations: usize,
    /// The Room's last revision.
    pub revisions: i64,
    /// Objectives by status (`completed`, `waiting_for_owner`, …).
    pub objectives: BTreeMap<String, usize>,
    /// Operation rows by status.
    pub operation_statuses: BTreeMap<String, usize>,
    /// Executions beyond the first of an operation or of a task identity.
    pub duplicate_executions: usize,
    /// Revisions that do not rebuild, and accepted owner messages not found.
    pub lost_revisions: usize,
    /// Ledger checks that failed.
    pub ledger_mismatches: usize,
    /// Operations neither closed with their ledger row nor open with their reservation.
    pub unsettled_calls: usize,
    /// Objectives (or owner messages being interpreted) with nothing in flight and no reason
    /// to wait.
    pub stuck_objectives: usize,
    /// What broke, one line each.
    pub violations: Vec<String>,
}

impl Findings {
    /// Whether any invariant failed.
    pub fn violated(&self) -> bool {
        !self.violations.is_empty()
    }
}

/// Every operation row, each once.
async fn all_operations(
    store: &dyn Stores,
    findings: &mut Findings,
) -> anyhow::Result<BTreeMap<OperationId, OperationRecord>> {
    let mut records = BTreeMap::new();
    for status in STATUSES {
        for record in store
            .operations(OperationFilter::Status(status))
            .await
            .context("reading operation rows")?
        {
            *findings
                .operation_statuses
                .entry(status.as_str().to_owned())
                .or_default() += 1;
            if let Some(twice) = records.insert(record.op(), record) {
                findings.unsettled_calls += 1;
                findings
                    .violations
                    .push(format!("operation {} has two rows", twice.op()));
            }
        }
    }
    Ok(records)
}

/// One whole line of the scripted agents' journal.
struct Execution {
    op: OperationId,
    role: String,
    task: Option<String>,
}

fn journal(path: &Path) -> anyhow::Result<Vec<Execution>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
    };
    // A torn last line (no newline) never returned: by the journal it never ran.
    let whole = text.rfind('\n').map_or("", |at| &text[..at]);
    whole
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .with_context(|| format!("a journal line is not JSON: {line}"))?;
            let op = value["op"]
                .as_str()
                .and_then(|op| op.parse().ok())
                .with_context(|| format!("a journal line has no op: {line}"))?;
            Ok(Execution {
                op,
                role: value["role"].as_str().unwrap_or_default().to_owned(),
                task: value["task"].as_str().map(str::to_owned),
            })
        })
        .collect()
}

/// Checks every invariant of the run on `store` for `room`, with the scripted agents'
/// journal at `journal_path` and the owner messages the API answered 2xx (`accepted`).
pub(crate) async fn check(
    store: &dyn Stores,
    room: &RoomId,
    journal_path: &Path,
    accepted: &[EventId],
) -> anyhow::Result<Findings> {
    let mut findings = Findings::default();
    let stored: StoredRoom = store
        .load(room)
        .await
        .context("loading the Room")?
        .with_context(|| format!("no Room {room} in the store"))?;
    // Every objective the Room held: closed ones are read back from their records.
    let archived = store
        .all_objective_records(room)
        .await
        .context("reading closed objectives' records")?;
    let live = stored.clone();
    let stored = stored.with_records(archived);
    findings.revisions = stored.revision.0;
    let records = all_operations(store, &mut findings).await?;
    findings.operations = records.len();
    let rows = store.ledger(room).await.context("reading the ledger")?;
    let executions = journal(journal_path)?;
    findings.executions = executions.len();

    duplicates(&executions, &records, &mut findings);
    revisions(store, room, &live, &stored, accepted, &mut findings).await?;
    let closing = ledger(&stored, &rows, &records, &executions, &mut findings);
    calls(&stored, &records, &closing, &mut findings);
    objectives(&stored, &mut findings);
    Ok(findings)
}

/// No task executed twice (D2).
fn duplicates(
    executions: &[Execution],
    records: &BTreeMap<OperationId, OperationRecord>,
    findings: &mut Findings,
) {
    let mut by_op: BTreeMap<OperationId, usize> = BTreeMap::new();
    let mut by_task: BTreeMap<String, BTreeSet<OperationId>> = BTreeMap::new();
    for execution in executions {
        *by_op.entry(execution.op).or_default() += 1;
        if execution.role == "specialist"
            && let Some(task) = &execution.task
        {
            by_task
                .entry(task.clone())
                .or_default()
                .insert(execution.op);
        }
        if !records.contains_key(&execution.op) {
            findings.duplicate_executions += 1;
            findings.violations.push(format!(
                "operation {} was executed but has no operation row",
                execution.op
            ));
        }
    }
    for (op, n) in by_op.into_iter().filter(|(_, n)| *n > 1) {
        findings.duplicate_executions += n - 1;
        findings
            .violations
            .push(format!("operation {op} was executed {n} times"));
    }
    for (task, ops) in by_task.into_iter().filter(|(_, ops)| ops.len() > 1) {
        findings.duplicate_executions += ops.len() - 1;
        findings.violations.push(format!(
            "task {task} was executed by {} operations: {ops:?}",
            ops.len()
        ));
    }
}

/// Every accepted revision present (D1) and every 2xx-accepted owner message persisted,
/// accepted and taken up (T1).
///
/// `live` is the Room as stored, which the last revision must rebuild to; `held` is it with
/// its closed objectives' records put back (every objective it held).
async fn revisions(
    store: &dyn Stores,
    room: &RoomId,
    live: &StoredRoom,
    held: &StoredRoom,
    accepted: &[EventId],
    findings: &mut Findings,
) -> anyhow::Result<()> {
    for revision in Revision::FIRST.0..=live.revision.0 {
        match store.state_at(room, Revision(revision)).await {
            Ok(Some(state)) => {
                if revision == live.revision.0 && state != live.state {
                    findings.lost_revisions += 1;
                    findings.violations.push(format!(
                        "revision {revision} rebuilds otherwise than the stored state"
                    ));
                }
            }
            Ok(None) => {
                findings.lost_revisions += 1;
                findings
                    .violations
                    .push(format!("revision {revision} cannot be rebuilt (a gap)"));
            }
            Err(err) => {
                findings.lost_revisions += 1;
                findings
                    .violations
                    .push(format!("revision {revision} cannot be rebuilt: {err}"));
            }
        }
    }
    let unaccepted: BTreeSet<EventId> = store
        .unaccepted_events(room, 10_000)
        .await
        .context("reading unaccepted events")?
        .into_iter()
        .map(|e| e.id)
        .collect();
    let origins: BTreeSet<EventId> = held.state.objectives().iter().map(|o| o.origin()).collect();
    for id in accepted {
        let problem = if store
            .event(room, *id)
            .await
            .context("reading an event")?
            .is_none()
        {
            Some("is not persisted")
        } else if unaccepted.contains(id) {
            Some("was never accepted")
        } else if !origins.contains(id) && !live.state.intake().contains_key(id) {
            Some("is neither an objective nor being interpreted")
        } else {
            None
        };
        if let Some(problem) = problem {
            findings.lost_revisions += 1;
            findings
                .violations
                .push(format!("owner message {id}, answered 2xx, {problem}"));
        }
    }
    Ok(())
}

/// The ledger replays to its balances (B1..B3); returns each closed operation's closing row.
fn ledger(
    stored: &StoredRoom,
    rows: &[LedgerEntry],
    records: &BTreeMap<OperationId, OperationRecord>,
    executions: &[Execution],
    findings: &mut Findings,
) -> BTreeMap<OperationId, LedgerEntry> {
    let mismatch = |findings: &mut Findings, what: String| {
        findings.ledger_mismatches += 1;
        findings.violations.push(what);
    };
    let balances = stored.state.ledger().balances();
    match BudgetLedger::replay(rows) {
        Ok(replayed) if replayed.balances() == balances => {}
        Ok(replayed) => mismatch(
            findings,
            format!(
                "the ledger rows replay to {:?}, the Room holds {balances:?}",
                replayed.balances()
            ),
        ),
        Err(err) => mismatch(findings, format!("the ledger rows do not replay: {err}")),
    }
    let sum = [balances.spent, balances.reserved, balances.available]
        .iter()
        .try_fold(0_i64, |total, m| total.checked_add(m.micros()));
    if sum != Some(balances.limit.micros()) {
        mismatch(
            findings,
            format!("spent + reserved + available ≠ limit: {balances:?}"),
        );
    }
    let mut reserved: BTreeMap<OperationId, i64> = BTreeMap::new();
    let mut closing: BTreeMap<OperationId, LedgerEntry> = BTreeMap::new();
    let mut spent = 0_i64;
    for row in rows {
        match row {
            LedgerEntry::Reserved { op, amount }
                if reserved.insert(*op, amount.micros()).is_some() =>
            {
                mismatch(findings, format!("{op} was reserved twice"));
            }
            LedgerEntry::Settled { op, charged, .. }
            | LedgerEntry::Released {
                op,
                amount: charged,
            } => {
                if matches!(row, LedgerEntry::Settled { .. }) {
                    spent = spent.saturating_add(charged.micros());
                }
                if !reserved.contains_key(op) {
                    mismatch(findings, format!("{op} was closed without a reservation"));
                }
                if let Some(before) = closing.insert(*op, row.clone()) {
                    mismatch(
                        findings,
                        format!("{op} was closed twice: {before:?}, {row:?}"),
                    );
                }
            }
            _ => {}
        }
    }
    if spent != balances.spent.micros() {
        mismatch(
            findings,
            format!(
                "the settled charges add up to {spent} µ$, the Room has spent {}",
                balances.spent.micros()
            ),
        );
    }
    let ops: BTreeSet<OperationId> = records.keys().copied().collect();
    let reservations: BTreeSet<OperationId> = reserved.keys().copied().collect();
    for op in ops.symmetric_difference(&reservations) {
        mismatch(
            findings,
            format!("{op} has an operation row or a reservation, not both"),
        );
    }
    let (mut held, mut uncertain) = (0_i64, 0_i64);
    for operation in stored.state.operations().values() {
        match operation.state() {
            OperationState::InFlight | OperationState::CancelRequested => {
                held = held.saturating_add(operation.reservation().micros());
            }
            OperationState::Uncertain => {
                held = held.saturating_add(operation.reservation().micros());
                uncertain = uncertain.saturating_add(operation.reservation().micros());
            }
            OperationState::Settled | OperationState::Released => {}
        }
    }
    if held != balances.reserved.micros() || uncertain != balances.uncertain.micros() {
        mismatch(
            findings,
            format!(
                "open calls hold {held} µ$ ({uncertain} uncertain), the ledger {:?}",
                balances
            ),
        );
    }
    let ran: BTreeSet<OperationId> = executions.iter().map(|e| e.op).collect();
    for (op, row) in &closing {
        match row {
            LedgerEntry::Released { .. } if ran.contains(op) => {
                mismatch(
                    findings,
                    format!("{op} ran but was released without charge"),
                );
            }
            LedgerEntry::Settled { charged, .. } if !ran.contains(op) && charged.micros() > 0 => {
                mismatch(
                    findings,
                    format!("{op} never ran but was charged {charged:?}"),
                );
            }
            _ => {}
        }
    }
    closing
}

/// Every in-flight call receipted or uncertain with its reservation (D2, B3).
fn calls(
    stored: &StoredRoom,
    records: &BTreeMap<OperationId, OperationRecord>,
    closing: &BTreeMap<OperationId, LedgerEntry>,
    findings: &mut Findings,
) {
    let open = stored.state.operations();
    for (op, record) in records {
        let problem = match record.status {
            OperationStatus::Applied | OperationStatus::Resolved => {
                if !closing.contains_key(op) {
                    Some("is closed but its reservation has no closing ledger row")
                } else if open.contains_key(op) {
                    Some("is closed but still open in the Room")
                } else {
                    None
                }
            }
            OperationStatus::InFlight => Some("is still in flight after recovery"),
            OperationStatus::Receipted
            | OperationStatus::Uncertain
            | OperationStatus::DeadLetter => match open.get(op) {
                None => Some("is open but not in the Room"),
                Some(_) if closing.contains_key(op) => {
                    Some("is open but its reservation was closed")
                }
                Some(operation)
                    if record.status == OperationStatus::Uncertain
                        && operation.state() != OperationState::Uncertain =>
                {
                    Some("is uncertain but the Room does not hold it as uncertain")
                }
                Some(_) => None,
            },
        };
        if let Some(problem) = problem {
            findings.unsettled_calls += 1;
            findings
                .violations
                .push(format!("operation {op} ({:?}) {problem}", record.status));
        }
    }
    for op in open.keys().filter(|op| !records.contains_key(op)) {
        findings.unsettled_calls += 1;
        findings
            .violations
            .push(format!("operation {op} is open in the Room but has no row"));
    }
}

/// Every objective completed or waiting with a reason.
fn objectives(stored: &StoredRoom, findings: &mut Findings) {
    let open = stored.state.operations();
    for objective in stored.state.objectives() {
        let status = objective.status();
        *findings
            .objectives
            .entry(status.as_str().to_owned())
            .or_default() += 1;
        if matches!(status, ObjectiveStatus::Planning | ObjectiveStatus::Running)
            && !open.values().any(|o| o.objective() == Some(objective.id()))
        {
            findings.stuck_objectives += 1;
            findings.violations.push(format!(
                "objective {} is {} with no call in flight",
                objective.id(),
                status.as_str()
            ));
        }
    }
    for (event, interpretation) in stored.state.intake() {
        let in_flight = interpretation.op().is_some_and(|op| open.contains_key(&op));
        *findings
            .objectives
            .entry("message_being_interpreted".to_owned())
            .or_default() += 1;
        if !in_flight && interpretation.held().is_none() {
            findings.stuck_objectives += 1;
            findings.violations.push(format!(
                "owner message {event} is being interpreted with no call in flight"
            ));
        }
    }
}
