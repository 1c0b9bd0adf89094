//! `agentroom drill durable-call` (hidden): drives owner messages through the product's one
//! application service, [`Coordinator`] (the same path `agentroom serve` runs), on the
//! embedded database or on PostgreSQL (`--database-url`), so that crash tests can kill the
//! real binary at a named point (`AGENTROOM_CRASH_AT`) or with SIGKILL, or restart the
//! database under it, start it again and check what D2 promises. Not a product command.
//!
//! One run: open (or create and migrate) the embedded database under `--root`, or open the
//! PostgreSQL database, which must be migrated already (D5); build one coordinator over it
//! with the scripted provider and reconciler below; create the Room `local` if it is missing
//! and grant `oscar` the operator role (an input id decided once per Room, so a second run
//! changes nothing); recover first (`Coordinator::recover`, then wait until the calls its
//! decisions reserved have run, repeated until the leases a killed process left have expired
//! and nothing is open but dead letters); then post `--calls` owner messages, each persisted
//! (T1), accepted with its reasoner call reserved and leased (transaction 1), run by the
//! coordinator's runner and settled with its receipt (transaction 2), waiting until the Room
//! is quiet after each; and print a one-line JSON summary. With `--retries`, a message that
//! failed (the database went away) is tried again, bounded, and `--recover-at-end` recovers
//! once more before the summary. With `--stop-during-call`, the last message is posted and
//! the host stops gracefully (`Coordinator::shutdown`) while its call runs: the receipt is
//! recorded alone (passing `after_receipt`) and the next run's recovery applies it (D2, D6).
//!
//! The provider is scripted: before it returns, it appends the operation id to
//! `executions.log` under the root and fsyncs it — the provider's own record, which the
//! reconciler reads to confirm what an uncertain call did.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentroom_coordinator::{
    Committed, Coordinator, CoordinatorConfig, InputId, Outcome, RunnerConfig, ShutdownReport,
    Store,
};
use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{
    CallRequest, CallResult, Charge, MembershipChange, Proposal, ProposalKind, ReasonerResult,
    Reconciliation,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, OperationId, PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{Quotes, RoomSetup, RoomState};
use agentroom_ports::{
    OperationFilter, OperationRecord, OperationStatus, Receipt, ReconcileError, Reconciler,
    StoredRoom, SystemClock,
};
use agentroom_store_postgres::PgRooms;
use agentroom_store_sqlite::{Durability, SqliteRooms};
use agentroom_workflows::{Abort, CallOutcome, Provider, RecoveryReport};
use anyhow::{Context, bail};
use async_trait::async_trait;
use clap::{Args, Subcommand};
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::store::{PLANNING_DB, create_embedded, redact};

/// The provider's execution log under the root: one operation id per line.
pub(crate) const EXECUTION_LOG: &str = "executions.log";

/// The Room the drill drives.
const ROOM: &str = "local";
const OWNER: &str = "olive";
const OPERATOR: &str = "oscar";
/// The operator grant's input id: decided once per Room, so every later run's grant is
/// answered with the first decision and changes nothing.
const GRANT_OPERATOR: &str = "drill-grant-oscar";
/// The opening limit: room for a thousand reasoner reservations.
const LIMIT_MICROS: i64 = 1_000_000_000;
/// What a reasoner call reserves (B6 quote) and what the scripted provider charges.
const REASONER_QUOTE_MICROS: i64 = 1_000;
const CHARGED_MICROS: i64 = 400;
/// How often the coordinator reloads and decides again after losing the compare-and-swap,
/// and the base of its backoff.
const CONFLICT_RETRIES: u32 = 8;
const CONFLICT_BACKOFF: Duration = Duration::from_millis(5);
/// How often a message whose event another writer accepted first is replaced by the next one.
const MOVED_RETRIES: u32 = 8;
/// The first wait before a failed message is tried again (`--retries`), doubling up to the
/// last.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How long a graceful stop (`--stop-during-call`) lets the running call finish: longer than
/// any `--call-ms` the tests use, so the call ends within it and records its receipt.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The namespace every id the drill derives lives in.
const NAMESPACE: Uuid = Uuid::from_u128(0x6472_696c_6c5f_6475_7261_626c_6563_616c);

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Recover, then post owner messages through the coordinator with a scripted provider.
    // Named for what it drives: durable calls, each an owner message's reasoner call.
    #[command(name = "durable-call")]
    Calls(CallsArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CallsArgs {
    /// The data directory (`planning.db` and `executions.log` inside it; only the log with
    /// `--database-url`).
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// A migrated PostgreSQL database instead of the embedded file (`postgres://user@host/db`).
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// How many owner messages (one reasoner call each) to post after recovery.
    #[arg(long, default_value_t = 3)]
    calls: u32,
    /// The lease this process takes on its operations.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    lease_ms: u64,
    /// How long each provider call takes (it stops early when aborted).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    call_ms: u64,
    /// How often a message that failed (e.g. the database went away) is tried again, with
    /// backoff; 0 ends the run at the first failure. A call is never tried again: whatever
    /// one left open, recovery settles.
    #[arg(long, default_value_t = 0)]
    retries: u32,
    /// Recover once more after the calls, as a running coordinator does from time to time,
    /// so that calls a failure left open are settled by this process.
    #[arg(long, conflicts_with = "stop_during_call")]
    recover_at_end: bool,
    /// Stop the host gracefully (`Coordinator::shutdown`) right after posting the last
    /// message, while its call runs (give it `--call-ms`): the call's receipt is recorded
    /// alone and left for the next run's recovery to apply.
    #[arg(long)]
    stop_during_call: bool,
    /// Post this many owner messages at once each time (issue 21): the Room decides those
    /// that wait together and commits them in one transaction (a group), whose crash points
    /// the crash tests kill at.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    together: u32,
}

pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    match command {
        Command::Calls(args) => durable_call(args).await,
    }
}

async fn durable_call(args: CallsArgs) -> anyhow::Result<String> {
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

/// What one run counted: the call outcomes its coordinator committed, and the failures it
/// tried again.
#[derive(Debug, Default)]
struct Tally {
    ends: BTreeMap<&'static str, u32>,
    retried: u32,
    /// The first few failures, for the summary.
    failures: Vec<String>,
}

impl Tally {
    /// Counts the call outcomes among `commits` (the coordinator's watch, drained): how each
    /// call this process settled, or learned about, ended. Other decisions (events accepted,
    /// the operator grant) are not calls.
    fn commits(&mut self, commits: &mut mpsc::UnboundedReceiver<Committed>) {
        while let Ok(committed) = commits.try_recv() {
            let end = match committed.input {
                "call_returned" => "applied",
                "call_uncertain" => "uncertain",
                "call_settled" => "not_sent",
                "reconciled" => "reconciled",
                _ => continue,
            };
            *self.ends.entry(end).or_default() += 1;
        }
    }

    fn failed(&mut self, err: &anyhow::Error) {
        self.retried += 1;
        if self.failures.len() < 8 {
            // What failed and why, without the chain in between: store errors repeat
            // their sources in their own messages.
            self.failures.push(format!("{err}: {}", err.root_cause()));
        }
    }
}

async fn drive(store: Arc<dyn Store>, args: CallsArgs) -> anyhow::Result<String> {
    let log = args.root.join(EXECUTION_LOG);
    let room_id = RoomId::parse(ROOM)?;
    // Issue 21: a crash test may kill this process inside a group's transaction.
    agentroom_ports::rooms::on_inside_group(|| {
        agentroom_workflows::crash::crash_point(agentroom_workflows::crash::INSIDE_GROUP);
    });
    let lease = Duration::from_millis(args.lease_ms.max(30));
    let runner = RunnerConfig::new(format!("drill-{}", std::process::id()), lease)
        .with_abort_grace(Duration::from_millis(200))
        .with_not_sent_retries(2, Duration::from_millis(10), Duration::from_millis(100));
    let coordinator = Coordinator::builder(
        Arc::clone(&store),
        CoordinatorConfig::new(runner).with_conflict_retries(CONFLICT_RETRIES, CONFLICT_BACKOFF),
    )
    .provider(Arc::new(DrillProvider {
        log: log.clone(),
        call: Duration::from_millis(args.call_ms),
    }))
    .reconciler(Arc::new(DrillReconciler { log }))
    .clock(Arc::new(SystemClock))
    .catalog(Arc::new(MemoryCatalog::new()))
    .build();
    // Watching from before the first decision, so every call outcome of this run is counted.
    let mut commits = coordinator.watch();
    ensure_room(&coordinator, &room_id).await?;

    let mut tally = Tally::default();
    let (recovery, passes) = recover(&coordinator, &*store, lease).await?;

    for n in 0..args.calls {
        let mut attempt = 0_u32;
        loop {
            let posted = if args.together > 1 {
                messages_together(&coordinator, &room_id, args.together).await
            } else {
                one_message(&coordinator, &room_id).await.map(|_| ())
            };
            match posted {
                Ok(_) => break,
                Err(err) if attempt < args.retries => {
                    attempt += 1;
                    tally.failed(&err);
                    let wait = RETRY_BACKOFF.saturating_mul(1 << attempt.min(8).saturating_sub(1));
                    tokio::time::sleep(wait.min(RETRY_BACKOFF_MAX)).await;
                }
                Err(err) => return Err(err),
            }
        }
        // The last message's call is left running for the stop below.
        if !(args.stop_during_call && n + 1 == args.calls) {
            coordinator.wait_idle().await;
        }
    }
    let stop = if args.stop_during_call {
        Some(coordinator.shutdown(STOP_GRACE).await)
    } else {
        None
    };
    let last = if args.recover_at_end {
        Some(recover(&coordinator, &*store, lease).await?)
    } else {
        None
    };
    tally.commits(&mut commits);
    summary(
        &coordinator,
        &*store,
        &room_id,
        (&recovery, passes),
        last.as_ref(),
        stop.as_ref(),
        &tally,
    )
    .await
}

/// Recovers until no operation is left open: a killed process's leases are live until they
/// expire (by the database clock), so this waits them out, bounded. Calls that recovery's
/// decisions reserve (an interpretation released as never run is issued again) run in the
/// coordinator; each pass waits for them, and one that ends uncertain is reconciled by the
/// next pass.
async fn recover(
    coordinator: &Coordinator,
    store: &dyn Store,
    lease: Duration,
) -> anyhow::Result<(RecoveryReport, u32)> {
    let deadline =
        Instant::now() + lease.min(agentroom_ports::MAX_LEASE) * 4 + Duration::from_secs(2);
    let mut total = RecoveryReport::default();
    let mut passes = 0;
    loop {
        let report = coordinator.recover().await.context("recovering")?;
        passes += 1;
        total.delivered.extend(report.delivered);
        total.undelivered.extend(report.undelivered);
        total.claimed.extend(report.claimed);
        total.reconciled.extend(report.reconciled);
        total.uncertain = report.uncertain;
        total.dead_lettered.extend(report.dead_lettered);
        total.live = report.live;
        total.resolved.extend(report.resolved);
        coordinator.wait_idle().await;
        // Dead letters wait for an operator, not for another pass.
        let open = store
            .operations(OperationFilter::Open)
            .await
            .context("listing the open operations")?;
        let settled = open
            .iter()
            .all(|record| record.status == OperationStatus::DeadLetter);
        if settled || Instant::now() >= deadline {
            return Ok((total, passes));
        }
        tokio::time::sleep((lease / 4).max(Duration::from_millis(10))).await;
    }
}

/// Posts the next owner message (T1: persisted, then accepted by id); its reasoner call runs
/// in the coordinator. An event another writer accepted meanwhile is replaced by the next one.
async fn one_message(coordinator: &Coordinator, room_id: &RoomId) -> anyhow::Result<Outcome> {
    for _ in 0..=MOVED_RETRIES {
        let room = coordinator
            .room(room_id)
            .await
            .with_context(|| format!("loading room {room_id}"))?;
        let event = next_message(&room)?;
        let outcome = coordinator
            .post(&event)
            .await
            .with_context(|| format!("posting owner message {}", event.id))?;
        if outcome != Outcome::AlreadyDone {
            return Ok(outcome);
        }
    }
    bail!("room {room_id} kept moving: every message was accepted by another writer first")
}

/// Posts `n` owner messages at once, each through its own task, as `n` clients of one host
/// would: those waiting for the Room together are decided as a group. Their ids derive from
/// the Room's revision, like [`next_message`]'s.
async fn messages_together(
    coordinator: &Coordinator,
    room_id: &RoomId,
    n: u32,
) -> anyhow::Result<()> {
    let room = coordinator
        .room(room_id)
        .await
        .with_context(|| format!("loading room {room_id}"))?;
    let mut posts = tokio::task::JoinSet::new();
    for k in 0..n {
        let mut event = next_message(&room)?;
        event.id = EventId::from_uuid(Uuid::new_v5(
            &NAMESPACE,
            format!("owner-message-{}-{k}", room.revision.0).as_bytes(),
        ));
        let coordinator = coordinator.clone();
        posts.spawn(async move {
            coordinator
                .post(&event)
                .await
                .with_context(|| format!("posting owner message {}", event.id))
        });
    }
    while let Some(posted) = posts.join_next().await {
        posted.context("a posting task ended")??;
    }
    Ok(())
}

/// The next owner message: its id derives from the Room's revision, so a run after a crash
/// posts again an event it persisted but did not get accepted (T1: the same id, the same
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

async fn summary(
    coordinator: &Coordinator,
    store: &dyn Store,
    room_id: &RoomId,
    (recovery, passes): (&RecoveryReport, u32),
    last: Option<&(RecoveryReport, u32)>,
    stop: Option<&ShutdownReport>,
    tally: &Tally,
) -> anyhow::Result<String> {
    let room = coordinator
        .room(room_id)
        .await
        .with_context(|| format!("loading room {room_id}"))?;
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
            .await
            .with_context(|| format!("listing the {} operations", status.as_str()))?
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
    if let Some(stop) = stop {
        let ids = |ops: &[OperationId]| ops.iter().map(ToString::to_string).collect::<Vec<_>>();
        line["stop"] = json!({
            "drained": stop.drained,
            "released": ids(&stop.released),
            "fenced": ids(&stop.fenced),
            "failed": ids(&stop.failed),
        });
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

/// Creates the Room (owner `olive`, a budget of 1,000 USD) unless it exists and grants
/// `oscar` the operator role, both through the coordinator and both idempotent (the grant is
/// an input id decided once per Room), so a crash between the two steps is finished by the
/// next run and a later run changes nothing.
async fn ensure_room(coordinator: &Coordinator, room_id: &RoomId) -> anyhow::Result<()> {
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
    coordinator
        .create_room(&state)
        .await
        .with_context(|| format!("creating room {room_id}"))?;
    coordinator
        .change_membership(
            room_id,
            InputId::named(GRANT_OPERATOR),
            principal(OWNER)?,
            principal(OPERATOR)?,
            Role::Operator,
            MembershipChange::Grant,
        )
        .await
        .with_context(|| format!("granting {OPERATOR} the operator role in room {room_id}"))?;
    // A refused grant is committed too (its log says why): check what the Room holds.
    let room = coordinator
        .room(room_id)
        .await
        .with_context(|| format!("loading room {room_id}"))?;
    if !room
        .state
        .members()
        .has(&principal(OPERATOR)?, Role::Operator)
    {
        bail!("room {room_id}: the grant of the operator role to {OPERATOR} was refused");
    }
    Ok(())
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
    async fn call(
        &self,
        request: &CallRequest,
        _context: &agentroom_ports::CallContext,
        abort: Abort,
    ) -> CallOutcome {
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
            omitted: Vec::new(),
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
