//! Shared test support: a Room in the in-memory store, small providers, an owner that decides
//! call events with the domain and commits them, a scripted reconciler.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    dead_code,
    unreachable_pub
)]

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentroom_ports::conformance::Driver;
use agentroom_ports::domain::engine::{
    CallEvent, CallRequest, CallResult, Charge, Decision, Effect, Input, Proposal, ProposalKind,
    ReasonerResult, Reconciliation,
};
use agentroom_ports::domain::ids::{OperationId, RoomId, Timestamp};
use agentroom_ports::domain::ledger::Balances;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::RoomState;
use agentroom_ports::memory::MemoryStore;
use agentroom_ports::{
    Commit, CommitError, OperationRecord, Receipt, ReconcileError, Reconciler, RoomStore,
    StoredRoom, WorkflowStore,
};
use agentroom_workflows::{
    Abort, AbortReason, CallOutcome, Executed, Leased, Provider, Recovery, RecoveryReport, Runner,
    RunnerConfig,
};
use async_trait::async_trait;

pub const AT: Timestamp = Timestamp::from_millis(1_764_460_800_000);

/// Runs a test body with a deadline, so nothing can hang CI.
pub async fn within<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .expect("the test took too long")
}

pub fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// A runner config with a short lease.
pub fn config(runner: &str, lease_ms: u64) -> RunnerConfig {
    RunnerConfig::new(runner, ms(lease_ms))
        .with_abort_grace(ms(200))
        .with_not_sent_retries(3, ms(5), ms(40))
        .with_store_retries(1)
}

/// A Room with a limit of 1,000,000 micros and a reasoner quote of 1,000.
pub struct Room {
    pub store: Arc<MemoryStore>,
    pub driver: Driver,
}

impl Room {
    pub async fn new(name: &str) -> Room {
        let store = Arc::new(MemoryStore::new());
        let driver = Driver::create(&*store, name, 1_000_000).await;
        Room { store, driver }
    }

    pub fn id(&self) -> RoomId {
        self.driver.room()
    }

    pub fn stored(&self) -> StoredRoom {
        StoredRoom {
            state: self.driver.state.clone(),
            revision: self.driver.revision,
        }
    }

    pub async fn load(&self) -> StoredRoom {
        self.store.load(&self.id()).await.unwrap().unwrap()
    }

    pub async fn balances(&self) -> Balances {
        self.load().await.state.ledger().balances()
    }

    pub async fn record(&self, op: OperationId) -> OperationRecord {
        self.store.operation(op).await.unwrap().unwrap()
    }

    /// Commits `decision` with a lease of `lease_ms` for `owner` (0: expired at once).
    pub async fn commit_leased(&mut self, decision: &Decision, owner: &str, lease_ms: u64) {
        let grant = agentroom_ports::conformance::lease(owner, lease_ms);
        let room = self.id();
        let commit = Commit::decided(&room, &self.driver.state, decision, AT, "x", Some(&grant));
        self.driver.revision = self
            .store
            .commit(&room, self.driver.revision, commit)
            .await
            .unwrap();
        self.driver.state = decision.state.clone();
    }

    /// Another writer moves the Room (a limit raise by the operator).
    pub async fn raise_elsewhere(store: &MemoryStore, room: &RoomId, by: i64) {
        let stored = store.load(room).await.unwrap().unwrap();
        let mut driver = Driver::create(&MemoryStore::new(), room.as_str(), 1).await;
        driver.state = stored.state.clone();
        driver.revision = stored.revision;
        let decision = driver.raise(by);
        let commit = Commit::decided(room, &stored.state, &decision, AT, "raise_limit", None);
        store.commit(room, stored.revision, commit).await.unwrap();
    }

    /// Asks the running call `op` to abort (D3), as a control decision would.
    pub async fn cancel_elsewhere(store: &MemoryStore, room: &RoomId, op: OperationId) {
        let stored = store.load(room).await.unwrap().unwrap();
        let mut commit = Commit::state(&stored.state, &stored.state, AT, "control");
        commit.cancellations.push(op);
        store.commit(room, stored.revision, commit).await.unwrap();
    }
}

/// The reserved call of a decision.
pub fn call_of(decision: &Decision) -> CallRequest {
    decision
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::ReserveAndCall(request) => Some(request.clone()),
            _ => None,
        })
        .expect("a reserved call")
}

/// An ordinary answer to the call, charged `micros`.
pub fn answer(request: &CallRequest, micros: i64) -> Receipt {
    Receipt {
        model: None,
        omitted: Vec::new(),
        charge: Charge::Actual(UsdMicros::new(micros)),
        result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
            observed: request.observed,
            kind: ProposalKind::Answer {
                text: "forty-two".to_owned(),
            },
        })),
    }
}

/// Decides with the conformance driver's environment. Its ids derive from `name`, so two
/// deciders with different names never mint the same operation id.
pub struct TestDecider(Mutex<Driver>);

impl TestDecider {
    pub async fn new(name: &str) -> TestDecider {
        TestDecider(Mutex::new(
            Driver::create(&MemoryStore::new(), name, 1).await,
        ))
    }

    fn decide_now(&self, state: &RoomState, input: Input) -> Decision {
        let mut driver = self.0.lock().unwrap();
        driver.state = state.clone();
        driver.decide(input)
    }
}

/// What a provider saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub calls: AtomicU32,
    pub aborts: Mutex<Vec<AbortReason>>,
}

/// How a [`TestProvider`] behaves.
pub enum Behaviour {
    /// Returns an answer charged `micros` after `delay`, stopping early when aborted.
    Answer { micros: i64, delay: Duration },
    /// Returns an answer after `delay` whatever the abort says.
    Stubborn { micros: i64, delay: Duration },
    /// Never returns, ignores the abort.
    Hang,
    /// Waits for the abort, then stops.
    UntilAborted,
    /// Plays these outcomes in order, then answers.
    Script(Mutex<VecDeque<CallOutcome>>),
}

/// A check run while the call runs.
pub type During = Box<dyn FnMut(&CallRequest) + Send>;

pub struct TestProvider {
    pub behaviour: Behaviour,
    pub seen: Seen,
    /// Checked while the call runs (e.g. that the reservation is held).
    pub during: Mutex<Option<During>>,
}

impl TestProvider {
    pub fn new(behaviour: Behaviour) -> Arc<TestProvider> {
        Arc::new(TestProvider {
            behaviour,
            seen: Seen::default(),
            during: Mutex::new(None),
        })
    }

    pub fn script(outcomes: Vec<CallOutcome>) -> Arc<TestProvider> {
        Self::new(Behaviour::Script(Mutex::new(outcomes.into())))
    }

    pub fn calls(&self) -> u32 {
        self.seen.calls.load(Ordering::SeqCst)
    }

    pub fn aborts(&self) -> Vec<AbortReason> {
        self.seen.aborts.lock().unwrap().clone()
    }
}

#[async_trait]
impl Provider for TestProvider {
    async fn call(
        &self,
        request: &CallRequest,
        _context: &agentroom_ports::CallContext,
        abort: Abort,
    ) -> CallOutcome {
        self.seen.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(check) = self.during.lock().unwrap().as_mut() {
            check(request);
        }
        match &self.behaviour {
            Behaviour::Answer { micros, delay } => {
                tokio::select! {
                    () = tokio::time::sleep(*delay) => CallOutcome::Returned(answer(request, *micros)),
                    reason = abort.aborted() => {
                        self.seen.aborts.lock().unwrap().push(reason);
                        CallOutcome::Aborted
                    }
                }
            }
            Behaviour::Stubborn { micros, delay } => {
                tokio::time::sleep(*delay).await;
                if let Some(reason) = abort.reason() {
                    self.seen.aborts.lock().unwrap().push(reason);
                }
                CallOutcome::Returned(answer(request, *micros))
            }
            Behaviour::Hang => std::future::pending().await,
            Behaviour::UntilAborted => {
                let reason = abort.aborted().await;
                self.seen.aborts.lock().unwrap().push(reason);
                CallOutcome::Aborted
            }
            Behaviour::Script(outcomes) => {
                let next = outcomes.lock().unwrap().pop_front();
                next.unwrap_or_else(|| CallOutcome::Returned(answer(request, 400)))
            }
        }
    }
}

/// The Room's side in these tests (the coordinator's, in its simplest form): decides each
/// call event with the domain while the operation is in a state the event fits, commits it,
/// and marks the operation applied where the decision settled it.
pub struct TestOwner {
    pub store: Arc<MemoryStore>,
    decider: TestDecider,
    pub failing: AtomicBool,
    pub log: Mutex<Vec<(OperationId, &'static str)>>,
}

/// The name the tests log a call event under.
fn logged(event: &CallEvent) -> &'static str {
    match event {
        CallEvent::Returned { .. } => "deliver",
        CallEvent::Waiting { .. } => "waiting",
        CallEvent::NotSent(_) => "not_sent",
        CallEvent::Uncertain { .. } => "uncertain",
        CallEvent::Reconciled(_) => "reconciled",
    }
}

impl TestOwner {
    pub async fn new(store: Arc<MemoryStore>) -> Arc<TestOwner> {
        Arc::new(TestOwner {
            store,
            decider: TestDecider::new("owner-decider").await,
            failing: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
        })
    }

    pub fn took(&self) -> Vec<(OperationId, &'static str)> {
        self.log.lock().unwrap().clone()
    }

    /// What a run came to: a returned call's receipt recorded alone (fenced) and then
    /// decided, any other event decided. `false` when fenced or not taken.
    pub async fn take(&self, runner: &Runner, leased: &Leased, executed: &Executed) -> bool {
        if let Executed::Returned(receipt) = executed
            && !runner.record_alone(leased, receipt).await.unwrap()
        {
            return false;
        }
        let events = executed.events();
        !events.is_empty() && self.decide_all(&leased.room, leased.op(), events).await
    }

    /// Decides what a recovery pass found due and completes its report.
    pub async fn settle(&self, mut recovery: Recovery) -> RecoveryReport {
        for due in recovery.take_due() {
            let taken = self
                .decide_all(&due.record.room, due.record.op(), due.events.clone())
                .await;
            recovery.taken(&due, taken);
        }
        recovery.report
    }

    /// Decides `events` in order; whether the last was taken.
    pub async fn decide_all(&self, room: &RoomId, op: OperationId, events: Vec<CallEvent>) -> bool {
        let mut taken = false;
        for event in events {
            taken = self.decide(room, op, event).await.is_ok();
        }
        taken
    }

    /// Decides `event` (if the operation's domain state still fits it) and commits it.
    pub async fn decide(
        &self,
        room: &RoomId,
        op: OperationId,
        event: CallEvent,
    ) -> Result<(), String> {
        if self.failing.load(Ordering::SeqCst) {
            return Err("the owner is down".to_owned());
        }
        let what = logged(&event);
        for _ in 0..8 {
            let stored = self
                .store
                .load(room)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "no room".to_owned())?;
            let state = stored.state.operation(op).map(|o| o.state());
            let decision = state.filter(|state| event.fits(*state)).map(|_| {
                self.decider
                    .decide_now(&stored.state, event.clone().input(op))
            });
            if decision.is_none() && !event.settles() {
                return Ok(()); // nothing to decide: already done
            }
            let mut commit = match &decision {
                Some(decision) => Commit::decided(room, &stored.state, decision, AT, what, None),
                None => Commit::state(&stored.state, &stored.state, AT, what),
            };
            if event.settles() && decision.as_ref().is_none_or(|d| d.settles(op)) {
                commit.applied.push(op);
            }
            match self.store.commit(room, stored.revision, commit).await {
                Ok(_) => {
                    self.log.lock().unwrap().push((op, what));
                    return Ok(());
                }
                Err(CommitError::Conflict { .. }) => continue,
                Err(err) => return Err(err.to_string()),
            }
        }
        Err("still conflicting".to_owned())
    }
}

/// A runner over the test store and provider, with no reconciler to ask.
pub fn runner<W: WorkflowStore + 'static>(
    store: Arc<W>,
    provider: Arc<TestProvider>,
    config: RunnerConfig,
) -> Runner {
    Runner::new(store, provider, Arc::new(TestReconciler::new(None)), config)
}

/// Answers with a fixed outcome and counts how often it was asked.
pub struct TestReconciler {
    pub outcome: Mutex<Option<Reconciliation>>,
    pub asked: AtomicU32,
    pub failing: AtomicBool,
}

impl TestReconciler {
    pub fn new(outcome: Option<Reconciliation>) -> TestReconciler {
        TestReconciler {
            outcome: Mutex::new(outcome),
            asked: AtomicU32::new(0),
            failing: AtomicBool::new(false),
        }
    }

    pub fn asked(&self) -> u32 {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Reconciler for TestReconciler {
    async fn reconcile(
        &self,
        _operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(ReconcileError("the provider's records are down".to_owned()));
        }
        Ok(self.outcome.lock().unwrap().clone())
    }
}

/// How [`Heartbeats`] answers a heartbeat.
#[derive(Debug, Clone, Copy)]
pub enum HeartbeatFault {
    /// Answers after this long (a loaded server).
    Slow(Duration),
    /// Fails at once (the database is unreachable).
    Failing,
    /// Never answers.
    Hanging,
}

/// The in-memory store with faulty heartbeats; everything else goes straight to it.
pub struct Heartbeats {
    pub store: Arc<MemoryStore>,
    pub fault: HeartbeatFault,
    /// Heartbeats sent to the store (each one write, whatever the leases it names).
    pub sent: AtomicU32,
    /// Leases those heartbeats named, summed.
    pub leases: AtomicU32,
}

impl Heartbeats {
    pub fn new(store: Arc<MemoryStore>, fault: HeartbeatFault) -> Arc<Heartbeats> {
        Arc::new(Heartbeats {
            store,
            fault,
            sent: AtomicU32::new(0),
            leases: AtomicU32::new(0),
        })
    }
}

#[async_trait]
impl WorkflowStore for Heartbeats {
    async fn claim_expired(
        &self,
        lease: agentroom_ports::LeaseGrant,
        limit: usize,
    ) -> Result<Vec<agentroom_ports::ClaimedOperation>, agentroom_ports::StoreError> {
        self.store.claim_expired(lease, limit).await
    }

    async fn heartbeat(
        &self,
        op: OperationId,
        generation: i64,
        duration: Duration,
    ) -> Result<agentroom_ports::Heartbeat, agentroom_ports::StoreError> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        match self.fault {
            HeartbeatFault::Slow(delay) => {
                tokio::time::sleep(delay).await;
                self.store.heartbeat(op, generation, duration).await
            }
            HeartbeatFault::Failing => Err(agentroom_ports::StoreError::database(
                "heartbeat",
                "connection refused",
            )),
            HeartbeatFault::Hanging => std::future::pending().await,
        }
    }

    async fn heartbeat_all(
        &self,
        leases: &[(OperationId, i64)],
        duration: Duration,
    ) -> Result<Vec<agentroom_ports::Heartbeat>, agentroom_ports::StoreError> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        let named = u32::try_from(leases.len()).unwrap();
        self.leases.fetch_add(named, Ordering::SeqCst);
        match self.fault {
            HeartbeatFault::Slow(delay) => {
                tokio::time::sleep(delay).await;
                self.store.heartbeat_all(leases, duration).await
            }
            HeartbeatFault::Failing => Err(agentroom_ports::StoreError::database(
                "heartbeat",
                "connection refused",
            )),
            HeartbeatFault::Hanging => std::future::pending().await,
        }
    }

    async fn record_receipt(
        &self,
        op: OperationId,
        generation: i64,
        receipt: &Receipt,
    ) -> Result<agentroom_ports::ReceiptWrite, agentroom_ports::StoreError> {
        self.store.record_receipt(op, generation, receipt).await
    }

    async fn mark_uncertain(
        &self,
        op: OperationId,
        generation: i64,
    ) -> Result<bool, agentroom_ports::StoreError> {
        self.store.mark_uncertain(op, generation).await
    }

    async fn count_recovery_attempt(
        &self,
        op: OperationId,
    ) -> Result<Option<u32>, agentroom_ports::StoreError> {
        self.store.count_recovery_attempt(op).await
    }

    async fn dead_letter(
        &self,
        op: OperationId,
        reason: &str,
    ) -> Result<bool, agentroom_ports::StoreError> {
        self.store.dead_letter(op, reason).await
    }

    async fn resolve(
        &self,
        op: OperationId,
        resolution: &agentroom_ports::Resolution,
    ) -> Result<bool, agentroom_ports::StoreError> {
        self.store.resolve(op, resolution).await
    }

    async fn operation(
        &self,
        op: OperationId,
    ) -> Result<Option<OperationRecord>, agentroom_ports::StoreError> {
        self.store.operation(op).await
    }

    async fn operations(
        &self,
        filter: agentroom_ports::OperationFilter,
    ) -> Result<Vec<OperationRecord>, agentroom_ports::StoreError> {
        self.store.operations(filter).await
    }

    async fn room_operations(
        &self,
        room: &RoomId,
        status: Option<agentroom_ports::OperationStatus>,
    ) -> Result<Vec<OperationRecord>, agentroom_ports::StoreError> {
        self.store.room_operations(room, status).await
    }

    async fn release_lease(
        &self,
        op: OperationId,
        generation: i64,
    ) -> Result<bool, agentroom_ports::StoreError> {
        self.store.release_lease(op, generation).await
    }
}
