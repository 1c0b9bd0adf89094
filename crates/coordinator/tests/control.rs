//! Control reaching running calls (D3, D4), on SQLite and on PostgreSQL (a fresh schema per
//! test). The demo scenario's first specialist call (`gather`) runs through a slow specialist
//! whose call waits on a gate the test holds: a real provider, the scripted agents with their
//! durable journal behind it, and the journal's reconciler. While it runs, the owner pauses
//! or cancels the objective; the call either stops when its heartbeat reads the cancel flag
//! or finishes anyway, and each test checks what the rules say it becomes, and that the
//! ledger adds up to the micro.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

mod support;

#[path = "../../store-postgres/tests/common/mod.rs"]
mod pg;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentroom_agents::Agents;
use agentroom_agents::scripted::{Journal, JournalReconciler, Scenario, Scripted};
use agentroom_coordinator::{
    CollectingNotifier, Coordinator, CoordinatorConfig, InputId, Outcome, Ports, Store,
};
use agentroom_ports::OperationFilter;
use agentroom_ports::domain::catalog::MemoryCatalog;
use agentroom_ports::domain::engine::{
    CallRequest, ControlAction, LateDecision, MembershipChange, Verdict as LogVerdict,
};
use agentroom_ports::domain::ids::{ObjectiveId, OperationId};
use agentroom_ports::domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::ObjectiveStatus;
use agentroom_ports::domain::plan::{Column, TaskState};
use agentroom_ports::domain::rules::Rule;
use agentroom_ports::domain::state::CallRole;
use agentroom_store_sqlite::{Durability, SqliteRooms};
use agentroom_workflows::{Abort, CallOutcome, Provider, RunnerConfig};
use async_trait::async_trait;
use support::{TickClock, assert_completed_and_balanced, owner_event, room_id, room_of, scenario};
use tokio::sync::Notify;

/// What the slow call does once its abort fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnAbort {
    /// Stop cooperatively ([`CallOutcome::Aborted`]) without running the specialist.
    Stop,
    /// Finish anyway once the test opens the gate: the specialist's work was already under
    /// way, runs to the end and returns.
    FinishAnyway,
}

/// The scripted agents, whose first specialist call waits on a gate the test holds.
struct SlowSpecialist {
    inner: Agents,
    on_abort: OnAbort,
    armed: AtomicBool,
    /// The slow call started.
    started: Notify,
    /// The slow call saw its abort fire.
    saw_abort: Notify,
    /// The test lets the slow call go on.
    gate: Notify,
}

#[async_trait]
impl Provider for SlowSpecialist {
    async fn call(&self, request: &CallRequest, abort: Abort) -> CallOutcome {
        let slow = request.role == CallRole::Specialist && self.armed.swap(false, Ordering::SeqCst);
        if slow {
            self.started.notify_one();
            match self.on_abort {
                OnAbort::Stop => {
                    tokio::select! {
                        () = self.gate.notified() => {}
                        _ = abort.aborted() => return CallOutcome::Aborted,
                    }
                }
                OnAbort::FinishAnyway => {
                    abort.aborted().await;
                    self.saw_abort.notify_one();
                    self.gate.notified().await;
                    // Its work was under way before the abort and is not stopped: it runs
                    // to the end as if nobody had asked (the router would send nothing
                    // once the abort fired).
                    return self.inner.call(request, Abort::never()).await;
                }
            }
        }
        self.inner.call(request, abort).await
    }
}

type ControlCoordinator<S> =
    Coordinator<S, SlowSpecialist, JournalReconciler, TickClock, MemoryCatalog>;

/// One test's world: the coordinator over `store`, the slow specialist, the demo scenario.
struct World<S: Store> {
    store: Arc<S>,
    coordinator: ControlCoordinator<S>,
    slow: Arc<SlowSpecialist>,
    scenario: Scenario,
    _journal_dir: tempfile::TempDir,
}

impl<S: Store> World<S> {
    async fn new(store: Arc<S>, on_abort: OnAbort) -> Self {
        let scenario = scenario("demo.toml");
        let (state, catalog) = room_of(&scenario);
        let journal_dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(Journal::open(journal_dir.path().join("journal.jsonl")).unwrap());
        let scripted = Arc::new(Scripted::new(scenario.clone()).with_journal(journal));
        let reconciler = scripted.reconciler().unwrap();
        let slow = Arc::new(SlowSpecialist {
            inner: scripted.agents(),
            on_abort,
            armed: AtomicBool::new(true),
            started: Notify::new(),
            saw_abort: Notify::new(),
            gate: Notify::new(),
        });
        // Heartbeats every 20 ms so the cancel flag is read soon; a long grace so a call
        // that finishes anyway is never dropped while the test opens its gate.
        let runner = RunnerConfig::new("control", Duration::from_secs(30))
            .with_heartbeat(Duration::from_millis(20))
            .with_abort_grace(Duration::from_secs(120));
        let coordinator = Coordinator::new(
            Ports {
                store: Arc::clone(&store),
                provider: Arc::clone(&slow),
                reconciler: Arc::new(reconciler),
                clock: Arc::new(TickClock::default()),
                catalog: Arc::new(catalog),
                notifier: Arc::new(CollectingNotifier::new()),
            },
            CoordinatorConfig::new(runner),
        );
        coordinator.recover().await.unwrap();
        coordinator.create_room(&state).await.unwrap();
        let spec = scenario.room().unwrap();
        for (principal, roles) in &spec.members {
            for role in roles {
                coordinator
                    .change_membership(
                        &room_id(),
                        InputId::named(&format!("grant {principal} {role:?}")),
                        spec.owner.clone(),
                        principal.clone(),
                        *role,
                        MembershipChange::Grant,
                    )
                    .await
                    .unwrap();
            }
        }
        Self {
            store,
            coordinator,
            slow,
            scenario,
            _journal_dir: journal_dir,
        }
    }

    /// Posts the owner's message and waits until the slow call runs; the objective and the
    /// slow call's operation.
    async fn start(&self) -> (ObjectiveId, OperationId) {
        let outcome = self
            .coordinator
            .post(&owner_event(&self.scenario, 0))
            .await
            .unwrap();
        assert!(matches!(outcome, Outcome::Decided { .. }), "{outcome:?}");
        self.slow.started.notified().await;
        let stored = self.store.load(&room_id()).await.unwrap().unwrap();
        let objective = stored.state.objectives().last().expect("an objective");
        let running: Vec<OperationId> = stored
            .state
            .operations()
            .values()
            .filter(|o| o.role() == CallRole::Specialist)
            .map(|o| o.id())
            .collect();
        assert_eq!(running.len(), 1, "{running:?}");
        (objective.id(), running[0])
    }

    async fn control(&self, name: &str, objective: ObjectiveId, action: ControlAction) -> Outcome {
        let owner = self.scenario.room().unwrap().owner.clone();
        self.coordinator
            .control(&room_id(), InputId::named(name), owner, objective, action)
            .await
            .unwrap()
    }

    async fn late(&self, op: OperationId, decision: LateDecision) -> Outcome {
        let owner = self.scenario.room().unwrap().owner.clone();
        self.coordinator
            .decide_late_result(
                &room_id(),
                InputId::named(&format!("late {op}")),
                owner,
                op,
                decision,
            )
            .await
            .unwrap()
    }

    /// The objective's status and the column and state of its `gather` task.
    async fn gather(&self) -> (ObjectiveStatus, Column, TaskState) {
        let stored = self.store.load(&room_id()).await.unwrap().unwrap();
        let objective = stored.state.objectives().last().unwrap();
        let plan = objective.current_plan().unwrap();
        let task = plan
            .tasks()
            .iter()
            .find(|t| t.key().as_str() == "gather")
            .unwrap();
        (
            objective.status(),
            plan.column_of(task),
            task.state().clone(),
        )
    }

    /// The ledger rows replay to the stored balances, nothing is reserved, no operation is
    /// open, and the charges add up to `spent`, to the micro.
    async fn assert_settled(&self, spent: i64) {
        let stored = self.store.load(&room_id()).await.unwrap().unwrap();
        let rows = self.store.ledger(&room_id()).await.unwrap();
        let balances = stored.state.ledger().balances();
        assert_eq!(BudgetLedger::replay(&rows).unwrap().balances(), balances);
        assert_eq!(balances.reserved, UsdMicros::ZERO, "{rows:#?}");
        assert_eq!(balances.spent, UsdMicros::new(spent), "{rows:#?}");
        let charged: i64 = rows
            .iter()
            .map(|r| match r {
                LedgerEntry::Settled { charged, .. } => charged.micros(),
                _ => 0,
            })
            .sum();
        assert_eq!(charged, spent);
        let reserved: i64 = rows
            .iter()
            .map(|r| match r {
                LedgerEntry::Reserved { amount, .. } => amount.micros(),
                _ => 0,
            })
            .sum();
        let returned: i64 = rows
            .iter()
            .map(|r| match r {
                LedgerEntry::Settled { reserved, .. } => reserved.micros(),
                LedgerEntry::Released { amount, .. } => amount.micros(),
                _ => 0,
            })
            .sum();
        assert_eq!(reserved, returned, "every reservation settled or released");
        let open = self.store.operations(OperationFilter::Open).await.unwrap();
        assert!(open.is_empty(), "open operations: {open:#?}");
    }

    async fn ledger(&self) -> Vec<LedgerEntry> {
        self.store.ledger(&room_id()).await.unwrap()
    }
}

/// The scripted charges of the demo (scenarios/demo.toml): the first plan's reasoner call,
/// and the `gather` specialist call.
const PLAN_CHARGE: i64 = 2_100;
const GATHER_CHARGE: i64 = 3_400;

fn accepted_by(outcome: &Outcome, rule: Rule) -> bool {
    outcome
        .log()
        .iter()
        .any(|e| e.verdict == LogVerdict::Accepted && e.rule == Some(rule))
}

fn released(rows: &[LedgerEntry], op: OperationId) -> bool {
    rows.iter()
        .any(|r| matches!(r, LedgerEntry::Released { op: o, .. } if *o == op))
}

fn settled(rows: &[LedgerEntry], op: OperationId) -> Option<i64> {
    rows.iter().find_map(|r| match r {
        LedgerEntry::Settled { op: o, charged, .. } if *o == op => Some(charged.micros()),
        _ => None,
    })
}

async fn pause_during_a_running_call_then_resume<S: Store>(store: Arc<S>) {
    let world = World::new(store, OnAbort::Stop).await;
    let (objective, op) = world.start().await;
    let paused = world
        .control("pause", objective, ControlAction::Pause)
        .await;
    assert!(accepted_by(&paused, Rule::D3), "{paused:?}");
    world.coordinator.wait_idle().await;
    // The call read the cancel flag, stopped, and its journal shows it never ran: released,
    // and the task is open again while the objective is paused.
    let rows = world.ledger().await;
    assert!(released(&rows, op), "{rows:#?}");
    let (status, column, state) = world.gather().await;
    assert_eq!(status, ObjectiveStatus::Paused);
    assert_eq!((column, state), (Column::Todo, TaskState::Pending));
    world.assert_settled(PLAN_CHARGE).await;
    let resumed = world
        .control("resume", objective, ControlAction::Resume)
        .await;
    assert!(accepted_by(&resumed, Rule::D3), "{resumed:?}");
    world.coordinator.wait_idle().await;
    assert_completed_and_balanced(&*world.store).await;
}

async fn cancel_during_a_running_call<S: Store>(store: Arc<S>) {
    let world = World::new(store, OnAbort::Stop).await;
    let (objective, op) = world.start().await;
    let canceled = world
        .control("cancel", objective, ControlAction::Cancel)
        .await;
    assert!(accepted_by(&canceled, Rule::D3), "{canceled:?}");
    world.coordinator.wait_idle().await;
    let rows = world.ledger().await;
    assert!(released(&rows, op), "{rows:#?}");
    let (status, ..) = world.gather().await;
    assert_eq!(status, ObjectiveStatus::Canceled);
    // Only the plan was charged; the aborted call's whole reservation came back.
    world.assert_settled(PLAN_CHARGE).await;
}

/// Pauses while the slow call runs and lets it finish anyway: its result lands after the
/// control change.
async fn a_result_landing_after_pause<S: Store>(world: &World<S>) -> (ObjectiveId, OperationId) {
    let (objective, op) = world.start().await;
    let paused = world
        .control("pause", objective, ControlAction::Pause)
        .await;
    assert!(accepted_by(&paused, Rule::D3), "{paused:?}");
    world.slow.saw_abort.notified().await;
    world.slow.gate.notify_one();
    world.coordinator.wait_idle().await;
    // D4: charged its usage, held for readmission; nothing else moved.
    let rows = world.ledger().await;
    assert_eq!(settled(&rows, op), Some(GATHER_CHARGE), "{rows:#?}");
    let (status, column, state) = world.gather().await;
    assert_eq!(status, ObjectiveStatus::Paused);
    assert_eq!(column, Column::InProgress);
    assert_eq!(state, TaskState::HeldForReadmission { op });
    let stored = world.store.load(&room_id()).await.unwrap().unwrap();
    assert!(stored.state.held_results().contains_key(&op));
    world.assert_settled(PLAN_CHARGE + GATHER_CHARGE).await;
    (objective, op)
}

async fn a_late_result_held_then_readmitted<S: Store>(store: Arc<S>) {
    let world = World::new(store, OnAbort::FinishAnyway).await;
    let (objective, op) = a_result_landing_after_pause(&world).await;
    let readmitted = world.late(op, LateDecision::Readmit).await;
    assert!(accepted_by(&readmitted, Rule::D4), "{readmitted:?}");
    let (status, column, _) = world.gather().await;
    assert_eq!((status, column), (ObjectiveStatus::Paused, Column::Done));
    let resumed = world
        .control("resume", objective, ControlAction::Resume)
        .await;
    assert!(accepted_by(&resumed, Rule::D3), "{resumed:?}");
    world.coordinator.wait_idle().await;
    assert_completed_and_balanced(&*world.store).await;
}

async fn a_late_result_held_then_discarded<S: Store>(store: Arc<S>) {
    let world = World::new(store, OnAbort::FinishAnyway).await;
    let (objective, op) = a_result_landing_after_pause(&world).await;
    let discarded = world.late(op, LateDecision::Discard).await;
    assert!(accepted_by(&discarded, Rule::D4), "{discarded:?}");
    // The task stays open; its charge stays spent.
    let (status, column, state) = world.gather().await;
    assert_eq!(status, ObjectiveStatus::Paused);
    assert_eq!((column, state), (Column::Todo, TaskState::Pending));
    let stored = world.store.load(&room_id()).await.unwrap().unwrap();
    assert!(stored.state.held_results().is_empty());
    world.assert_settled(PLAN_CHARGE + GATHER_CHARGE).await;
    // A discarded result cannot be decided again.
    let again = world
        .coordinator
        .decide_late_result(
            &room_id(),
            InputId::named("late again"),
            world.scenario.room().unwrap().owner.clone(),
            op,
            LateDecision::Readmit,
        )
        .await;
    assert!(again.is_err(), "{again:?}");
    let canceled = world
        .control("cancel", objective, ControlAction::Cancel)
        .await;
    assert!(accepted_by(&canceled, Rule::D3), "{canceled:?}");
    world.coordinator.wait_idle().await;
    world.assert_settled(PLAN_CHARGE + GATHER_CHARGE).await;
}

fn sqlite() -> (tempfile::TempDir, Arc<SqliteRooms>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("planning.db");
    agentroom_store_sqlite::migrate::up(&path).unwrap();
    let store = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap();
    (dir, Arc::new(store))
}

async fn on_sqlite<F, Fut>(test: F)
where
    F: FnOnce(Arc<SqliteRooms>) -> Fut,
    Fut: Future<Output = ()>,
{
    let (_dir, store) = sqlite();
    test(store).await;
}

async fn on_postgres<F, Fut>(test: F)
where
    F: FnOnce(Arc<agentroom_store_postgres::PgRooms>) -> Fut,
    Fut: Future<Output = ()>,
{
    let (schema, store) = pg::migrated_rooms().await;
    test(Arc::new(store)).await;
    pg::drop_schema(&schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_pause_during_a_running_call_aborts_it_and_resume_completes_on_sqlite() {
    on_sqlite(pause_during_a_running_call_then_resume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_pause_during_a_running_call_aborts_it_and_resume_completes_on_postgres() {
    on_postgres(pause_during_a_running_call_then_resume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_cancel_during_a_running_call_releases_its_reservation_on_sqlite() {
    on_sqlite(cancel_during_a_running_call).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_cancel_during_a_running_call_releases_its_reservation_on_postgres() {
    on_postgres(cancel_during_a_running_call).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_a_result_landing_after_pause_is_charged_held_and_readmitted_on_sqlite() {
    on_sqlite(a_late_result_held_then_readmitted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_a_result_landing_after_pause_is_charged_held_and_readmitted_on_postgres() {
    on_postgres(a_late_result_held_then_readmitted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_a_result_landing_after_pause_is_charged_held_and_discarded_on_sqlite() {
    on_sqlite(a_late_result_held_then_discarded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_a_result_landing_after_pause_is_charged_held_and_discarded_on_postgres() {
    on_postgres(a_late_result_held_then_discarded).await;
}
