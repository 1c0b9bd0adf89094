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

use agentroom_coordinator::{InputId, Outcome, Store};
use agentroom_ports::domain::engine::{ControlAction, LateDecision, Verdict as LogVerdict};
use agentroom_ports::domain::ids::{ObjectiveId, OperationId};
use agentroom_ports::domain::ledger::LedgerEntry;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::ObjectiveStatus;
use agentroom_ports::domain::plan::{Column, TaskState};
use agentroom_ports::domain::rules::Rule;
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{OperationFilter, OperationStatus};
use agentroom_store_sqlite::{Durability, SqliteRooms};
use support::slow::{OnAbort, World};
use support::{assert_completed_and_balanced, room_id};

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

async fn cancel_while_a_call_finishes_anyway<S: Store>(store: Arc<S>) {
    let world = World::new(store, OnAbort::FinishAnyway).await;
    let (objective, op) = world.start().await;
    let canceled = world
        .control("cancel", objective, ControlAction::Cancel)
        .await;
    assert!(accepted_by(&canceled, Rule::D3), "{canceled:?}");
    world.slow.saw_abort.notified().await;
    world.slow.gate.notify_one();
    world.coordinator.wait_idle().await;
    // D4: the result that landed after the cancel is charged its usage and held; the
    // objective stays canceled and nothing else runs.
    let rows = world.ledger().await;
    assert_eq!(settled(&rows, op), Some(GATHER_CHARGE), "{rows:#?}");
    let (status, ..) = world.gather().await;
    assert_eq!(status, ObjectiveStatus::Canceled);
    world.assert_settled(PLAN_CHARGE + GATHER_CHARGE).await;
    // A canceled objective uses nothing: readmitting is refused and moves nothing.
    let readmitted = world.late(op, LateDecision::Readmit).await;
    assert!(
        readmitted
            .log()
            .iter()
            .any(|e| e.verdict == LogVerdict::Rejected && e.rule == Some(Rule::D4)),
        "{readmitted:?}"
    );
    let (status, ..) = world.gather().await;
    assert_eq!(status, ObjectiveStatus::Canceled);
    world.assert_settled(PLAN_CHARGE + GATHER_CHARGE).await;
}

async fn an_aborted_call_nobody_can_confirm<S: Store>(store: Arc<S>) {
    // The reconciler answers for the reasoner only: nobody knows what the specialist did.
    let world = World::confirming(store, OnAbort::Stop, &[CallRole::Reasoner]).await;
    let (objective, op) = world.start().await;
    world
        .control("cancel", objective, ControlAction::Cancel)
        .await;
    world.coordinator.wait_idle().await;
    // D2: uncertain, its whole reservation held, never replayed: nothing is lost and
    // nothing is guessed; the operator resolves it.
    let stored = world.store.load(&room_id()).await.unwrap().unwrap();
    let held = stored.state.ledger().balances().reserved;
    let reservation = stored.state.operation(op).unwrap().reservation();
    assert_eq!(held, reservation);
    assert!(held > UsdMicros::ZERO);
    assert_eq!(
        stored.state.ledger().balances().spent,
        UsdMicros::new(PLAN_CHARGE)
    );
    let uncertain = world
        .store
        .operations(OperationFilter::Status(OperationStatus::Uncertain))
        .await
        .unwrap();
    assert_eq!(
        uncertain.iter().map(|r| r.op()).collect::<Vec<_>>(),
        vec![op]
    );
    let (status, ..) = world.gather().await;
    assert_eq!(status, ObjectiveStatus::Canceled);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_a_result_landing_after_cancel_is_charged_and_never_used_on_sqlite() {
    on_sqlite(cancel_while_a_call_finishes_anyway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_a_result_landing_after_cancel_is_charged_and_never_used_on_postgres() {
    on_postgres(cancel_while_a_call_finishes_anyway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_an_aborted_call_nobody_can_confirm_stays_uncertain_with_its_reservation_on_sqlite() {
    on_sqlite(an_aborted_call_nobody_can_confirm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_an_aborted_call_nobody_can_confirm_stays_uncertain_with_its_reservation_on_postgres() {
    on_postgres(an_aborted_call_nobody_can_confirm).await;
}
