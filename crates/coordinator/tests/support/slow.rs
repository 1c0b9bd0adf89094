//! A slow specialist for tests of control and of coordinator plans: the demo scenario's
//! scripted agents (with their durable journal and its reconciler), whose first specialist
//! call waits on a gate the test holds, and the coordinator around them.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a failed unwrap here is a failed test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentroom_agents::Agents;
use agentroom_agents::scripted::{Journal, JournalReconciler, SCRIPTED_ROLES, Scenario, Scripted};
use agentroom_coordinator::{
    CollectingNotifier, Coordinator, CoordinatorConfig, InputId, Outcome, Store,
};
use agentroom_ports::OperationFilter;
use agentroom_ports::domain::engine::{CallRequest, ControlAction, LateDecision, MembershipChange};
use agentroom_ports::domain::ids::{ObjectiveId, OperationId};
use agentroom_ports::domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::ObjectiveStatus;
use agentroom_ports::domain::plan::{Column, TaskState};
use agentroom_ports::domain::state::CallRole;
use agentroom_workflows::{Abort, CallOutcome, Provider, RunnerConfig};
use async_trait::async_trait;
use tokio::sync::Notify;

use super::{TickClock, owner_event, room_id, room_of, scenario};

/// What the slow call does once its abort fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnAbort {
    /// Stop cooperatively ([`CallOutcome::Aborted`]) without running the specialist.
    Stop,
    /// Finish anyway once the test opens the gate: the specialist's work was already under
    /// way, runs to the end and returns.
    FinishAnyway,
}

/// The scripted agents, whose first specialist call waits on a gate the test holds.
pub struct SlowSpecialist {
    inner: Agents,
    on_abort: OnAbort,
    armed: AtomicBool,
    /// The slow call started.
    pub started: Notify,
    /// The slow call saw its abort fire.
    pub saw_abort: Notify,
    /// The test lets the slow call go on.
    pub gate: Notify,
}

#[async_trait]
impl Provider for SlowSpecialist {
    async fn call(
        &self,
        request: &CallRequest,
        context: &agentroom_ports::CallContext,
        abort: Abort,
    ) -> CallOutcome {
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
                    return self.inner.call(request, context, Abort::never()).await;
                }
            }
        }
        self.inner.call(request, context, abort).await
    }
}

/// One test's world: the coordinator over `store`, the slow specialist, the demo scenario.
pub struct World<S: Store> {
    pub store: Arc<S>,
    pub coordinator: Coordinator,
    pub slow: Arc<SlowSpecialist>,
    pub scenario: Scenario,
    _journal_dir: tempfile::TempDir,
}

impl<S: Store> World<S> {
    pub async fn new(store: Arc<S>, on_abort: OnAbort) -> Self {
        Self::confirming(store, on_abort, &SCRIPTED_ROLES).await
    }

    /// A world whose reconciler answers only for calls of `roles` (the journal's reconciler
    /// restricted to them; for other calls nobody knows).
    pub async fn confirming(store: Arc<S>, on_abort: OnAbort, roles: &[CallRole]) -> Self {
        let scenario = scenario("demo.toml");
        let (state, catalog) = room_of(&scenario);
        let journal_dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(Journal::open(journal_dir.path().join("journal.jsonl")).unwrap());
        let scripted = Arc::new(Scripted::new(scenario.clone()).with_journal(journal));
        let reconciler = JournalReconciler::new(journal_dir.path().join("journal.jsonl"), roles);
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
        let coordinator = Coordinator::builder(store.clone(), CoordinatorConfig::new(runner))
            .provider(slow.clone())
            .reconciler(Arc::new(reconciler))
            .clock(Arc::new(TickClock::default()))
            .catalog(Arc::new(catalog))
            .notifier(Arc::new(CollectingNotifier::new()))
            .build();
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
    pub async fn start(&self) -> (ObjectiveId, OperationId) {
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

    pub async fn control(
        &self,
        name: &str,
        objective: ObjectiveId,
        action: ControlAction,
    ) -> Outcome {
        let owner = self.scenario.room().unwrap().owner.clone();
        self.coordinator
            .control(&room_id(), InputId::named(name), owner, objective, action)
            .await
            .unwrap()
    }

    pub async fn late(&self, op: OperationId, decision: LateDecision) -> Outcome {
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
    pub async fn gather(&self) -> (ObjectiveStatus, Column, TaskState) {
        // Closed, it may have left the live state for its record (issue 21).
        let stored = self.store.load(&room_id()).await.unwrap().unwrap();
        let records = self.store.all_objective_records(&room_id()).await.unwrap();
        let stored = stored.with_records(records);
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
    pub async fn assert_settled(&self, spent: i64) {
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

    pub async fn ledger(&self) -> Vec<LedgerEntry> {
        self.store.ledger(&room_id()).await.unwrap()
    }
}
