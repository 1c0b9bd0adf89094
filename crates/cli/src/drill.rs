//! `agentroom drill durable-call` (hidden): drives real durable calls on the embedded database
//! or on PostgreSQL (`--database-url`) so that crash tests can kill the real binary at a named
//! point (`AGENTROOM_CRASH_AT`) or with SIGKILL, or restart the database under it, start it
//! again and check what D2 promises. Not a product command.
//!
//! One run: open (or create and migrate) the embedded database under `--root`, or open the
//! PostgreSQL database, which must be migrated already (D5), create the Room `local` if it is
//! missing (through `decide`), recover first (`Runner::recover`, waiting out the leases a killed
//! process left), then run `--calls` owner messages, each a durable call of one reasoner
//! operation, and print a one-line JSON summary. With `--retries`, a message that failed (the
//! database went away) is tried again, bounded, and `--recover-at-end` recovers once more
//! before the summary. The provider is scripted: before it returns, it appends the operation id
//! to `executions.log` under the root and fsyncs it — the provider's own record, which the
//! reconciler reads to confirm what an uncertain call did.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{
    CallRequest, CallResult, Charge, Decision, Effect, Env, Input, InputError, MembershipChange,
    Proposal, ProposalKind, ReasonerResult, Reconciliation, decide,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{DerivedIds, EventId, OperationId, PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{OperationState, Quotes, RoomSetup, RoomState};
use agentroom_ports::{
    Clock, Commit, CommitError, LeaseGrant, OperationFilter, OperationRecord, OperationStatus,
    Receipt, ReconcileError, Reconciler, RoomStore, StoreError, StoredRoom, SystemClock,
    WorkflowStore,
};
use agentroom_store_postgres::PgRooms;
use agentroom_store_sqlite::{Durability, SqliteRooms};
use agentroom_workflows::{
    Abort, CallEnd, CallOutcome, Decider, DurableCall, Leased, OwnerError, Provider, ReceiptOwner,
    RecoveryReport, RunOutcome, Runner, RunnerConfig, WorkflowError, settled_by,
};
use anyhow::{Context, bail};
use async_trait::async_trait;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use uuid::Uuid;

use crate::store::{PLANNING_DB, create_embedded, redact};

/// The provider's execution log under the root: one operation id per line.
pub(crate) const EXECUTION_LOG: &str = "executions.log";

/// The Room the drill drives.
const ROOM: &str = "local";
const OWNER: &str = "olive";
const OPERATOR: &str = "oscar";
/// The opening limit: room for a thousand reasoner reservations.
const LIMIT_MICROS: i64 = 1_000_000_000;
/// What a reasoner call reserves (B6 quote) and what the scripted provider charges.
const REASONER_QUOTE_MICROS: i64 = 1_000;
const CHARGED_MICROS: i64 = 400;
/// How often an owner commit reloads after a conflict.
const CONFLICT_RETRIES: u32 = 8;
/// The first wait before a failed message is tried again (`--retries`), doubling up to the
/// last.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The namespace every id the drill derives lives in.
const NAMESPACE: Uuid = Uuid::from_u128(0x6472_696c_6c5f_6475_7261_626c_6563_616c);

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Recover, then run owner messages as durable calls with a scripted provider.
    DurableCall(DurableCallArgs),
}

/// Which code path runs a reserved call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CallPath {
    /// `DurableCall::run`: transaction 2 commits the receipt with the settled state.
    Durable,
    /// `DurableCall::reserve`, then `Runner::run`: the receipt is recorded alone and then
    /// handed to the owner (passes `after_receipt`).
    Runner,
}

#[derive(Debug, Args)]
pub(crate) struct DurableCallArgs {
    /// The data directory (`planning.db` and `executions.log` inside it; only the log with
    /// `--database-url`).
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// A migrated PostgreSQL database instead of the embedded file (`postgres://user@host/db`).
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// How many owner messages (one reasoner call each) to run after recovery.
    #[arg(long, default_value_t = 3)]
    calls: u32,
    /// The lease this process takes on its operations.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    lease_ms: u64,
    /// How long each provider call takes (it stops early when aborted).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    call_ms: u64,
    /// Which code path runs the calls.
    #[arg(long, value_enum, default_value_t = CallPath::Durable)]
    path: CallPath,
    /// How often a message that failed (e.g. the database went away) is tried again, with
    /// backoff; 0 ends the run at the first failure. A call is never tried again: whatever
    /// one left open, recovery settles.
    #[arg(long, default_value_t = 0)]
    retries: u32,
    /// Recover once more after the calls, as a running coordinator does from time to time,
    /// so that calls a failure left open are settled by this process.
    #[arg(long)]
    recover_at_end: bool,
}

pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    match command {
        Command::DurableCall(args) => durable_call(args).await,
    }
}

async fn durable_call(args: DurableCallArgs) -> anyhow::Result<String> {
    if let Some(url) = &args.database_url {
        std::fs::create_dir_all(&args.root)
            .with_context(|| format!("creating {}", args.root.display()))?;
        let store = PgRooms::connect(url)
            .await
            .with_context(|| format!("opening {}", redact(url)))?;
        return drive(Arc::new(store), args).await;
    }
    let path = args.root.join(PLANNING_DB);
    if !path.exists() {
        create_embedded(&args.root, &path)?;
    }
    let store = SqliteRooms::open(&path, Durability::ProcessCrash)
        .with_context(|| format!("opening {}", path.display()))?;
    drive(Arc::new(store), args).await
}

/// What a store must offer the drill.
trait DrillStore: RoomStore + WorkflowStore + 'static {}

impl<S: RoomStore + WorkflowStore + 'static> DrillStore for S {}

/// What one run counted: how each call ended, and the failures it tried again.
#[derive(Debug, Default)]
struct Tally {
    ends: BTreeMap<&'static str, u32>,
    retried: u32,
    /// The first few failures, for the summary.
    failures: Vec<String>,
}

impl Tally {
    fn end(&mut self, end: &'static str) {
        *self.ends.entry(end).or_default() += 1;
    }

    fn failed(&mut self, err: &anyhow::Error) {
        self.retried += 1;
        if self.failures.len() < 8 {
            self.failures.push(err.to_string());
        }
    }
}

async fn drive<S: DrillStore>(store: Arc<S>, args: DurableCallArgs) -> anyhow::Result<String> {
    let log = args.root.join(EXECUTION_LOG);
    let decider = Arc::new(DrillDecider::default());
    let room_id = RoomId::parse(ROOM)?;
    ensure_room(&*store, &decider, &room_id).await?;

    let lease = Duration::from_millis(args.lease_ms.max(30));
    let config = RunnerConfig::new(format!("drill-{}", std::process::id()), lease)
        .with_abort_grace(Duration::from_millis(200))
        .with_not_sent_retries(2, Duration::from_millis(10), Duration::from_millis(100));
    let provider = Arc::new(DrillProvider {
        log: log.clone(),
        call: Duration::from_millis(args.call_ms),
    });
    let owner = Arc::new(DrillOwner {
        store: Arc::clone(&store),
        decider: Arc::clone(&decider),
        grant: config.lease_grant(),
        next: Mutex::new(Vec::new()),
    });
    let runner = Runner::new(
        Arc::clone(&store),
        Arc::clone(&provider),
        Arc::clone(&owner),
        config.clone(),
    );
    let reconciler = DrillReconciler { log };

    let mut tally = Tally::default();
    let (recovery, passes) =
        recover(&runner, &owner, &*store, &reconciler, lease, &mut tally).await?;

    let durable = DurableCall::new(&*store, &*provider, &*decider, &SystemClock, &config);
    for _ in 0..args.calls {
        let mut attempt = 0_u32;
        loop {
            match one_message(&*store, &decider, &durable, &runner, &room_id, args.path).await {
                Ok(ends) => {
                    for end in ends {
                        tally.end(end);
                    }
                    break;
                }
                Err(err) if attempt < args.retries => {
                    attempt += 1;
                    tally.failed(&err);
                    let wait = RETRY_BACKOFF.saturating_mul(1 << attempt.min(8).saturating_sub(1));
                    tokio::time::sleep(wait.min(RETRY_BACKOFF_MAX)).await;
                }
                Err(err) => return Err(err),
            }
        }
        run_follow_ups(&runner, &owner, &mut tally, args.retries > 0).await?;
    }
    let last = if args.recover_at_end {
        Some(recover(&runner, &owner, &*store, &reconciler, lease, &mut tally).await?)
    } else {
        None
    };
    summary(
        &*store,
        &room_id,
        (&recovery, passes),
        last.as_ref(),
        &tally,
    )
    .await
}

type DrillRunner<S> = Runner<S, DrillProvider, DrillOwner<S>>;

/// Runs the calls the owner's decisions created (and the ones those create), each under the
/// lease the owner's commit took for this process. With `tolerant`, a run that failed is
/// counted and left to recovery (a call is never run twice).
async fn run_follow_ups<S: DrillStore>(
    runner: &DrillRunner<S>,
    owner: &DrillOwner<S>,
    tally: &mut Tally,
    tolerant: bool,
) -> anyhow::Result<()> {
    loop {
        let next = owner.take_next();
        if next.is_empty() {
            return Ok(());
        }
        for call in next {
            match runner.run(call).await {
                Ok(outcome) => tally.end(run_name(&outcome)),
                Err(err) if tolerant => {
                    tally.end("failed");
                    tally.failed(&err.into());
                }
                Err(err) => return Err(err.into()),
            }
        }
    }
}

/// Recovers until no operation is left open: a killed process's leases are live until they
/// expire (by the database clock), so this waits them out, bounded. Calls that recovery's
/// decisions create (an interpretation released as never run is issued again) are run by this
/// process between passes; one of those that ends uncertain is reconciled by the next pass.
async fn recover<S: DrillStore, R: Reconciler>(
    runner: &DrillRunner<S>,
    owner: &DrillOwner<S>,
    store: &S,
    reconciler: &R,
    lease: Duration,
    tally: &mut Tally,
) -> anyhow::Result<(RecoveryReport, u32)> {
    let deadline =
        Instant::now() + lease.min(agentroom_ports::MAX_LEASE) * 4 + Duration::from_secs(2);
    let mut total = RecoveryReport::default();
    let mut passes = 0;
    loop {
        let report = runner.recover(reconciler).await?;
        passes += 1;
        total.delivered.extend(report.delivered);
        total.undelivered.extend(report.undelivered);
        total.claimed.extend(report.claimed);
        total.reconciled.extend(report.reconciled);
        total.uncertain = report.uncertain;
        total.dead_lettered.extend(report.dead_lettered);
        total.live = report.live;
        run_follow_ups(runner, owner, tally, false).await?;
        // Dead letters wait for an operator, not for another pass.
        let open = store.operations(OperationFilter::Open).await?;
        let settled = open
            .iter()
            .all(|record| record.status == OperationStatus::DeadLetter);
        if settled || Instant::now() >= deadline {
            return Ok((total, passes));
        }
        tokio::time::sleep((lease / 4).max(Duration::from_millis(10))).await;
    }
}

/// One owner message: persisted (T1), decided, and its reasoner call run as a durable call;
/// a conflict in transaction 1 reloads and decides again. The ends of its calls.
async fn one_message<S: DrillStore>(
    store: &S,
    decider: &DrillDecider,
    durable: &DurableCall<'_, S, DrillProvider, DrillDecider>,
    runner: &DrillRunner<S>,
    room_id: &RoomId,
    path: CallPath,
) -> anyhow::Result<Vec<&'static str>> {
    for _ in 0..=CONFLICT_RETRIES {
        let room = load(store, room_id).await?;
        let event = next_message(&room)?;
        store.append_event(&event, SystemClock.now()).await?;
        let decision = decider.decide(&room.state, Input::EventAccepted(event))?;
        let ends = match path {
            CallPath::Durable => match durable.run(&room, &decision, "event_accepted").await {
                Ok(outcome) => {
                    let mut ends = Vec::new();
                    for call in outcome.calls {
                        ends.push(end_name(&call.end));
                        for next in call.next {
                            ends.push(run_name(&runner.run(next).await?));
                        }
                    }
                    ends
                }
                // Moved, or the event accepted by another writer meanwhile: take the next one.
                Err(
                    WorkflowError::Conflict { .. }
                    | WorkflowError::Commit(CommitError::AlreadyAccepted { .. }),
                ) => continue,
                Err(err) => return Err(err.into()),
            },
            CallPath::Runner => match durable.reserve(&room, &decision, "event_accepted").await {
                Ok(reserved) => {
                    let mut ends = Vec::new();
                    for call in reserved.calls {
                        ends.push(run_name(&runner.run(call).await?));
                    }
                    ends
                }
                Err(
                    WorkflowError::Conflict { .. }
                    | WorkflowError::Commit(CommitError::AlreadyAccepted { .. }),
                ) => continue,
                Err(err) => return Err(err.into()),
            },
        };
        return Ok(ends);
    }
    bail!("room {room_id} kept moving: still conflicting after {CONFLICT_RETRIES} reloads")
}

/// The next owner message: its id derives from the Room's revision, so a run after a crash
/// decides again an event it persisted but did not get accepted (T1: the same id, the same
/// content), and an accepted one, which moved the revision, is never repeated.
fn next_message(room: &StoredRoom) -> anyhow::Result<Event> {
    let n = room.revision.0;
    Ok(Event {
        id: EventId::from_uuid(Uuid::new_v5(
            &NAMESPACE,
            format!("owner-message-{n}").as_bytes(),
        )),
        room: room.state.room().clone(),
        author: principal(OWNER)?,
        body: EventBody::OwnerMessage {
            text: format!("drill message {n}"),
        },
    })
}

fn end_name(end: &CallEnd) -> &'static str {
    match end {
        CallEnd::Applied => "applied",
        CallEnd::Uncertain { .. } => "uncertain",
        CallEnd::NotSent { .. } => "not_sent",
        CallEnd::Fenced => "fenced",
        CallEnd::ReceiptedOnly { .. } => "receipted_only",
        CallEnd::Unsettled { .. } => "unsettled",
    }
}

fn run_name(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Receipted { delivered: true } => "applied",
        RunOutcome::Receipted { delivered: false } => "receipted_only",
        RunOutcome::Fenced => "fenced",
        RunOutcome::Uncertain { .. } => "uncertain",
        RunOutcome::NotSent { .. } => "not_sent",
    }
}

async fn summary<S: DrillStore>(
    store: &S,
    room_id: &RoomId,
    (recovery, passes): (&RecoveryReport, u32),
    last: Option<&(RecoveryReport, u32)>,
    tally: &Tally,
) -> anyhow::Result<String> {
    let room = load(store, room_id).await?;
    let balances = room.state.ledger().balances();
    let mut statuses = BTreeMap::new();
    for status in [
        OperationStatus::InFlight,
        OperationStatus::Receipted,
        OperationStatus::Applied,
        OperationStatus::Uncertain,
        OperationStatus::DeadLetter,
        OperationStatus::Resolved,
    ] {
        let count = store
            .operations(OperationFilter::Status(status))
            .await?
            .len();
        statuses.insert(status.as_str(), count);
    }
    let mut line = json!({
        "room": room_id.as_str(),
        "revision": room.revision.0,
        "balances": {
            "limit": balances.limit.micros(),
            "reserved": balances.reserved.micros(),
            "uncertain": balances.uncertain.micros(),
            "spent": balances.spent.micros(),
            "available": balances.available.micros(),
        },
        "operations": statuses,
        "recovery": report_json(recovery, passes),
        "calls": tally.ends,
        "retried": tally.retried,
        "failures": tally.failures,
    });
    if let Some((report, passes)) = last {
        line["final_recovery"] = report_json(report, *passes);
    }
    Ok(format!("{line}\n"))
}

fn report_json(report: &RecoveryReport, passes: u32) -> serde_json::Value {
    let ids = |ops: &[OperationId]| ops.iter().map(ToString::to_string).collect::<Vec<_>>();
    json!({
        "passes": passes,
        "delivered": ids(&report.delivered),
        "undelivered": ids(&report.undelivered),
        "claimed": ids(&report.claimed),
        "reconciled": ids(&report.reconciled),
        "uncertain": ids(&report.uncertain),
        "dead_lettered": ids(&report.dead_lettered),
        "live": ids(&report.live),
    })
}

fn principal(name: &str) -> anyhow::Result<PrincipalId> {
    PrincipalId::parse(name).with_context(|| format!("principal {name}"))
}

async fn load<S: RoomStore + ?Sized>(store: &S, room: &RoomId) -> anyhow::Result<StoredRoom> {
    store
        .load(room)
        .await?
        .with_context(|| format!("room {room} is not stored"))
}

/// Creates the Room (owner `olive`, a budget of 1,000 USD) if it is missing and grants
/// `oscar` the operator role through `decide`; idempotent, so a crash between the two steps
/// is finished by the next run.
async fn ensure_room<S: RoomStore + ?Sized>(
    store: &S,
    decider: &DrillDecider,
    room_id: &RoomId,
) -> anyhow::Result<()> {
    if store.load(room_id).await?.is_none() {
        let state = RoomState::new(RoomSetup {
            room: room_id.clone(),
            owner: principal(OWNER)?,
            policy: RoomPolicy::default(),
            access: AccessPolicy::default(),
            quotes: Quotes {
                reasoner: UsdMicros::new(REASONER_QUOTE_MICROS),
                specialist: UsdMicros::new(2 * REASONER_QUOTE_MICROS),
                reviewer: UsdMicros::new(REASONER_QUOTE_MICROS / 2),
            },
            limit: UsdMicros::new(LIMIT_MICROS),
        })?;
        match store.create(&state, SystemClock.now()).await {
            Ok(_) | Err(StoreError::RoomExists(_)) => {}
            Err(err) => return Err(err.into()),
        }
    }
    for _ in 0..=CONFLICT_RETRIES {
        let room = load(store, room_id).await?;
        if room
            .state
            .members()
            .has(&principal(OPERATOR)?, Role::Operator)
        {
            return Ok(());
        }
        let decision = decider.decide(
            &room.state,
            Input::ChangeMembership {
                by: principal(OWNER)?,
                principal: principal(OPERATOR)?,
                role: Role::Operator,
                change: MembershipChange::Grant,
            },
        )?;
        let commit = Commit::decided(
            room_id,
            &room.state,
            &decision,
            SystemClock.now(),
            "change_membership",
            None,
        );
        match store.commit(room_id, room.revision, commit).await {
            Ok(_) => return Ok(()),
            Err(CommitError::Conflict { .. }) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    bail!("room {room_id} kept moving while granting the operator")
}

/// Decides with ids derived from the persisted input (the event's id, or the operation's id
/// and the kind of outcome), so deciding the same input again yields the same ids.
#[derive(Debug, Default)]
pub(crate) struct DrillDecider {
    catalog: MemoryCatalog,
}

fn namespace_of(input: &Input) -> Uuid {
    let (base, kind): (&Uuid, &str) = match input {
        Input::EventAccepted(event) => return *event.id.as_uuid(),
        Input::CallReturned { op, .. } => (op.as_uuid(), "call_returned"),
        Input::CallSettled { op, .. } => (op.as_uuid(), "call_settled"),
        Input::CallUncertain { op } => (op.as_uuid(), "call_uncertain"),
        Input::Reconciled { op, .. } => (op.as_uuid(), "reconciled"),
        Input::ChangeMembership { principal, .. } => {
            return Uuid::new_v5(
                &NAMESPACE,
                format!("membership-{}", principal.as_str()).as_bytes(),
            );
        }
        _ => (&NAMESPACE, "other"),
    };
    Uuid::new_v5(base, kind.as_bytes())
}

impl Decider for DrillDecider {
    fn decide(&self, state: &RoomState, input: Input) -> Result<Decision, InputError> {
        let mut ids = DerivedIds::new(namespace_of(&input));
        let mut env = Env {
            now: SystemClock.now(),
            ids: &mut ids,
            catalog: &self.catalog,
        };
        decide(state, input, &mut env)
    }
}

/// The scripted reasoner: waits `call`, then records the execution in its own log (fsynced)
/// and answers, charged 400 micros.
pub(crate) struct DrillProvider {
    log: PathBuf,
    call: Duration,
}

/// Appends `op` to the execution log and syncs it to disk.
fn record_execution(log: &Path, op: OperationId) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    file.write_all(format!("{op}\n").as_bytes())?;
    file.sync_all()
}

#[async_trait]
impl Provider for DrillProvider {
    async fn call(&self, request: &CallRequest, abort: Abort) -> CallOutcome {
        tokio::select! {
            () = tokio::time::sleep(self.call) => {}
            _ = abort.aborted() => return CallOutcome::Aborted,
        }
        if let Err(err) = record_execution(&self.log, request.op) {
            // Nothing was recorded, so by this provider's own record nothing ran.
            return CallOutcome::NotSent {
                retry_after: None,
                reason: format!("the execution log cannot be written: {err}"),
            };
        }
        CallOutcome::Returned(Receipt {
            model: None,
            charge: Charge::Actual(UsdMicros::new(CHARGED_MICROS)),
            result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
                observed: request.observed,
                kind: ProposalKind::Answer {
                    text: format!("answer to {}", request.op),
                },
            })),
        })
    }
}

/// Confirms an uncertain call from the provider's execution log: recorded means it ran (its
/// result is lost: charged its whole reservation, B3), absent means it never ran (released).
pub(crate) struct DrillReconciler {
    log: PathBuf,
}

#[async_trait]
impl Reconciler for DrillReconciler {
    async fn reconcile(
        &self,
        operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError> {
        let text = match std::fs::read_to_string(&self.log) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(err) => return Err(ReconcileError(format!("{}: {err}", self.log.display()))),
        };
        let op = operation.op().to_string();
        Ok(Some(if text.lines().any(|line| line == op) {
            Reconciliation::ExecutedWithoutResult {
                charge: Charge::NoUsage,
            }
        } else {
            Reconciliation::NotExecuted
        }))
    }
}

/// The operations' owner: decides each outcome with the domain and commits it with
/// compare-and-swap, reloading on a conflict; idempotent (an outcome the Room has applied is
/// acknowledged, not applied twice).
pub(crate) struct DrillOwner<S> {
    store: Arc<S>,
    decider: Arc<DrillDecider>,
    /// The lease the owner takes on the calls its decisions create (it runs them itself).
    grant: LeaseGrant,
    /// Calls its decisions created, leased to this process, not yet run.
    next: Mutex<Vec<Leased>>,
}

impl<S: RoomStore> DrillOwner<S> {
    /// Takes the calls its decisions created since the last time.
    fn take_next(&self) -> Vec<Leased> {
        std::mem::take(&mut *self.next.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Decides `input` if the operation's domain state still calls for it, and commits it,
    /// marking the operation applied when `applied`.
    async fn apply(
        &self,
        record: &OperationRecord,
        what: &'static str,
        input: impl Fn(OperationState) -> Option<Input> + Send + Sync,
        applied: bool,
    ) -> Result<(), OwnerError> {
        let room = &record.room;
        let op = record.op();
        for _ in 0..=CONFLICT_RETRIES {
            let stored = self
                .store
                .load(room)
                .await
                .map_err(|e| OwnerError(e.to_string()))?
                .ok_or_else(|| OwnerError(format!("no room {room}")))?;
            let state = stored.state.operation(op).map(|o| o.state());
            let decision = match state.and_then(&input) {
                Some(input) => Some(
                    self.decider
                        .decide(&stored.state, input)
                        .map_err(|e| OwnerError(e.to_string()))?,
                ),
                None => None,
            };
            if decision.is_none() {
                if !applied {
                    return Ok(());
                }
                // Only an outcome the Room has settled may be marked applied: an operation
                // still open in the Room (e.g. not yet decided uncertain) waits for the next
                // recovery.
                if state.is_none_or(OperationState::is_open) {
                    return Err(OwnerError(format!(
                        "{op} is {state:?} in the room: {what} cannot be applied now"
                    )));
                }
            }
            let now = SystemClock.now();
            let mut commit = match &decision {
                Some(decision) => {
                    Commit::decided(room, &stored.state, decision, now, what, Some(&self.grant))
                }
                None => Commit::state(&stored.state, &stored.state, now, what),
            };
            if applied && decision.as_ref().is_none_or(|d| settled_by(d, op)) {
                commit.applied.push(op);
            }
            match self.store.commit(room, stored.revision, commit).await {
                Ok(_) => {
                    // A decision may reserve new calls (a released interpretation is issued
                    // again): they are leased to this process, which runs them.
                    let created =
                        decision
                            .iter()
                            .flat_map(|d| &d.effects)
                            .filter_map(|e| match e {
                                Effect::ReserveAndCall(request) => {
                                    Some(Leased::created(room.clone(), request.clone()))
                                }
                                _ => None,
                            });
                    self.next
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend(created);
                    return Ok(());
                }
                Err(CommitError::Conflict { .. }) => continue,
                Err(err) => return Err(OwnerError(err.to_string())),
            }
        }
        Err(OwnerError(format!(
            "room {room} still conflicting after {CONFLICT_RETRIES} reloads"
        )))
    }
}

fn running(state: OperationState) -> bool {
    matches!(
        state,
        OperationState::InFlight | OperationState::CancelRequested
    )
}

#[async_trait]
impl<S: RoomStore + 'static> ReceiptOwner for DrillOwner<S> {
    async fn deliver(
        &self,
        record: &OperationRecord,
        receipt: &Receipt,
        _generation: i64,
    ) -> Result<(), OwnerError> {
        let op = record.op();
        self.apply(
            record,
            "call_returned",
            |state| {
                running(state).then(|| Input::CallReturned {
                    op,
                    charge: receipt.charge,
                    result: receipt.result.clone(),
                })
            },
            true,
        )
        .await
    }

    async fn uncertain(&self, record: &OperationRecord) -> Result<(), OwnerError> {
        let op = record.op();
        self.apply(
            record,
            "call_uncertain",
            |state| running(state).then_some(Input::CallUncertain { op }),
            false,
        )
        .await
    }

    async fn reconciled(
        &self,
        record: &OperationRecord,
        outcome: &Reconciliation,
    ) -> Result<(), OwnerError> {
        let op = record.op();
        self.apply(
            record,
            "reconciled",
            |state| {
                (state == OperationState::Uncertain).then(|| Input::Reconciled {
                    op,
                    outcome: outcome.clone(),
                })
            },
            true,
        )
        .await
    }

    async fn not_sent(&self, record: &OperationRecord, _reason: &str) -> Result<(), OwnerError> {
        let op = record.op();
        self.apply(
            record,
            "call_settled",
            |state| {
                running(state).then_some(Input::CallSettled {
                    op,
                    charge: Charge::Actual(UsdMicros::ZERO),
                })
            },
            true,
        )
        .await
    }
}
