//! Support for the durable call tests (`tests/durable_call.rs`): a Room on the in-memory
//! store with a reasoner quote of 1,000 micros, small providers whose calls the tests shape
//! (answer, hang until aborted, play a script), a reconciler that counts how often it was
//! asked, and [`Interposed`], the in-memory store with a record of every commit and every
//! receipt recorded alone, and a hook that lets another writer commit right after a chosen
//! commit.
//!
//! Ported from `crates/workflows/tests/support/mod.rs` (its `Room`, `TestProvider`,
//! `Behaviour`, `TestReconciler`), now driving the `Coordinator` service.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a failed unwrap here is a failed test"
)]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentroom_coordinator::{Coordinator, CoordinatorConfig, InputId, Outcome, RunnerConfig};
use agentroom_ports::domain::engine::{
    CallRequest, CallResult, Charge, MembershipChange, Proposal, ProposalKind, ReasonerResult,
    Reconciliation,
};
use agentroom_ports::domain::event::{Event, EventBody};
use agentroom_ports::domain::ids::{
    EventId, NotificationId, OperationId, PrincipalId, RoomId, Timestamp,
};
use agentroom_ports::domain::ledger::{Balances, BudgetLedger, LedgerEntry};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_ports::domain::room::Role;
use agentroom_ports::domain::state::{CallRole, Quotes, RoomSetup, RoomState};
use agentroom_ports::memory::MemoryStore;
use agentroom_ports::tokens::SecretHash;
use agentroom_ports::{
    ClaimedOperation, Commit, CommitError, Delivered, EventAppend, Heartbeat, HistoryEntry,
    LeaseGrant, OperationFilter, OperationRecord, OperationStatus, Outbox, OutboxItem,
    OutboxPosition, Receipt, ReceiptWrite, ReconcileError, Reconciler, Resolution, Revision,
    RoomStore, StoreError, StoredRoom, TokenError, TokenId, TokenRecord, TokenStore, WorkflowStore,
};
use agentroom_workflows::{Abort, AbortReason, CallOutcome, Provider};
use async_trait::async_trait;
use tokio::sync::Notify;

/// Runs a test body with a deadline, so nothing can hang CI.
pub async fn within<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .expect("the test took too long")
}

pub fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

/// A runner config with a short lease (heartbeats a third of it apart), a short abort grace,
/// three retries of a call that reached nothing with backoff from 5 ms to 40 ms.
pub fn runner(name: &str, lease_ms: u64) -> RunnerConfig {
    RunnerConfig::new(name, ms(lease_ms))
        .with_abort_grace(ms(200))
        .with_not_sent_retries(3, ms(5), ms(40))
        .with_store_retries(1)
}

// --- the store ----------------------------------------------------------------------------

/// One commit the store was asked for, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenCommit {
    /// The kind of input it decided (`event_accepted`, `call_returned`, …).
    pub input: String,
    /// The revision it expected.
    pub expected: Revision,
    /// The revision it made, or why it failed.
    pub result: Result<Revision, String>,
    /// Operations it created.
    pub created: Vec<OperationId>,
    /// Receipts it wrote with the decision (fenced on their generations).
    pub receipts: Vec<OperationId>,
    /// Operations it marked applied.
    pub applied: Vec<OperationId>,
    /// How many commits the transaction it was part of made (1: committed alone; more: a
    /// group, issue 21).
    pub group: usize,
}

impl SeenCommit {
    /// Whether it lost the compare-and-swap.
    pub fn conflicted(&self) -> bool {
        self.result
            .as_ref()
            .is_err_and(|e| e.starts_with("conflict"))
    }
}

type Hook = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The in-memory store, recording every commit and every receipt recorded alone; an armed
/// hook runs right after the first commit that creates a call of its role, before that
/// commit's caller hears of it (another writer's commit between the reserving commit and
/// the send).
#[derive(Default)]
pub struct Interposed {
    pub inner: MemoryStore,
    commits: Mutex<Vec<SeenCommit>>,
    alone: Mutex<Vec<(OperationId, i64, ReceiptWrite)>>,
    hook: Mutex<Option<(CallRole, Hook)>>,
    hooked: Mutex<Option<CallRequest>>,
    /// How many of the next principal token revocations fail.
    failing_token_revocations: AtomicU32,
}

impl Interposed {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Every commit so far, in order.
    pub fn commits(&self) -> Vec<SeenCommit> {
        self.commits.lock().unwrap().clone()
    }

    /// The receipts recorded alone (not with a decision) so far.
    pub fn receipts_alone(&self) -> Vec<(OperationId, i64, ReceiptWrite)> {
        self.alone.lock().unwrap().clone()
    }

    /// Runs `then` right after the first successful commit that creates a call of `role`.
    pub fn after_reserving<F>(&self, role: CallRole, then: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        *self.hook.lock().unwrap() = Some((role, Box::pin(then)));
    }

    /// The call whose reserving commit ran the hook.
    pub fn hooked(&self) -> Option<CallRequest> {
        self.hooked.lock().unwrap().clone()
    }

    /// The next `n` revocations of a principal's tokens fail, revoking nothing.
    pub fn fail_token_revocations(&self, n: u32) {
        self.failing_token_revocations.store(n, Ordering::SeqCst);
    }

    /// What a test sees of `commit` at `expected` (its result still to come), and the calls
    /// it creates.
    fn seeing(expected: Revision, commit: &Commit<'_>) -> (SeenCommit, Vec<CallRequest>) {
        let created: Vec<CallRequest> = commit
            .operations
            .iter()
            .map(|o| o.request.clone())
            .collect();
        let seen = SeenCommit {
            input: commit.input.to_owned(),
            expected,
            result: Err(String::new()),
            created: created.iter().map(|r| r.op).collect(),
            receipts: commit.receipts.iter().map(|(op, _, _)| *op).collect(),
            applied: commit.applied.clone(),
            group: 1,
        };
        (seen, created)
    }

    fn shown(error: &CommitError) -> String {
        match error {
            CommitError::Conflict { .. } => format!("conflict: {error}"),
            other => other.to_string(),
        }
    }

    /// Runs the hook once a commit that created a call of its role went through.
    async fn after_commit(&self, committed: bool, created: &[CallRequest]) {
        if !committed {
            return;
        }
        let hook = {
            let mut hook = self.hook.lock().unwrap();
            let due = hook
                .as_ref()
                .and_then(|(role, _)| created.iter().find(|r| r.role == *role).cloned());
            due.and_then(|request| {
                *self.hooked.lock().unwrap() = Some(request);
                hook.take()
            })
        };
        if let Some((_, then)) = hook {
            then.await;
        }
    }
}

#[async_trait]
impl RoomStore for Interposed {
    async fn create(&self, state: &RoomState, at: Timestamp) -> Result<Revision, StoreError> {
        self.inner.create(state, at).await
    }

    async fn load(&self, room: &RoomId) -> Result<Option<StoredRoom>, StoreError> {
        self.inner.load(room).await
    }

    async fn commit(
        &self,
        room: &RoomId,
        expected: Revision,
        commit: Commit<'_>,
    ) -> Result<Revision, CommitError> {
        let (mut seen, created) = Self::seeing(expected, &commit);
        let result = self.inner.commit(room, expected, commit).await;
        seen.result = result.as_ref().map(|r| *r).map_err(Self::shown);
        self.commits.lock().unwrap().push(seen);
        self.after_commit(result.is_ok(), &created).await;
        result
    }

    async fn commit_group(
        &self,
        room: &RoomId,
        expected: Revision,
        commits: Vec<Commit<'_>>,
    ) -> Result<Vec<Revision>, CommitError> {
        let mut members = Vec::new();
        let mut created = Vec::new();
        let mut at = expected;
        for commit in &commits {
            let (mut seen, made) = Self::seeing(at, commit);
            seen.group = commits.len();
            members.push(seen);
            created.extend(made);
            at = at.next();
        }
        let result = self.inner.commit_group(room, expected, commits).await;
        {
            let mut seen = self.commits.lock().unwrap();
            for (i, mut member) in members.into_iter().enumerate() {
                member.result = match &result {
                    Ok(revisions) => Ok(revisions[i]),
                    Err(e) => Err(Self::shown(e)),
                };
                seen.push(member);
            }
        }
        self.after_commit(result.is_ok(), &created).await;
        result
    }

    async fn state_at(
        &self,
        room: &RoomId,
        revision: Revision,
    ) -> Result<Option<RoomState>, StoreError> {
        self.inner.state_at(room, revision).await
    }

    async fn ledger(&self, room: &RoomId) -> Result<Vec<LedgerEntry>, StoreError> {
        self.inner.ledger(room).await
    }

    async fn append_event(&self, event: &Event, at: Timestamp) -> Result<EventAppend, StoreError> {
        self.inner.append_event(event, at).await
    }

    async fn event(&self, room: &RoomId, id: EventId) -> Result<Option<Event>, StoreError> {
        self.inner.event(room, id).await
    }

    async fn unaccepted_events(
        &self,
        room: &RoomId,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.inner.unaccepted_events(room, limit).await
    }

    async fn input_decided(
        &self,
        room: &RoomId,
        input: InputId,
    ) -> Result<Option<Revision>, StoreError> {
        self.inner.input_decided(room, input).await
    }

    async fn history(
        &self,
        room: &RoomId,
        after: Revision,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        self.inner.history(room, after, limit).await
    }

    async fn delivered(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Delivered>, StoreError> {
        self.inner.delivered(room, after, limit).await
    }

    async fn outbox_position(
        &self,
        room: &RoomId,
        id: NotificationId,
    ) -> Result<Option<OutboxPosition>, StoreError> {
        self.inner.outbox_position(room, id).await
    }

    async fn rooms(&self, after: Option<&RoomId>, limit: usize) -> Result<Vec<RoomId>, StoreError> {
        self.inner.rooms(after, limit).await
    }

    async fn objective_record(
        &self,
        room: &RoomId,
        objective: agentroom_ports::domain::ids::ObjectiveId,
    ) -> Result<Option<agentroom_ports::domain::archive::ObjectiveRecord>, StoreError> {
        self.inner.objective_record(room, objective).await
    }

    async fn objective_records(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, agentroom_ports::domain::archive::ObjectiveRecord)>, StoreError> {
        self.inner.objective_records(room, after, limit).await
    }

    async fn records_by(
        &self,
        room: &RoomId,
        key: &agentroom_ports::RecordKey,
    ) -> Result<Vec<agentroom_ports::domain::archive::ObjectiveRecord>, StoreError> {
        self.inner.records_by(room, key).await
    }
}

#[async_trait]
impl WorkflowStore for Interposed {
    async fn claim_expired(
        &self,
        lease: LeaseGrant,
        limit: usize,
    ) -> Result<Vec<ClaimedOperation>, StoreError> {
        self.inner.claim_expired(lease, limit).await
    }

    async fn heartbeat(
        &self,
        op: OperationId,
        generation: i64,
        duration: Duration,
    ) -> Result<Heartbeat, StoreError> {
        self.inner.heartbeat(op, generation, duration).await
    }

    async fn record_receipt(
        &self,
        op: OperationId,
        generation: i64,
        receipt: &Receipt,
    ) -> Result<ReceiptWrite, StoreError> {
        let written = self.inner.record_receipt(op, generation, receipt).await;
        if let Ok(written) = &written {
            self.alone.lock().unwrap().push((op, generation, *written));
        }
        written
    }

    async fn mark_uncertain(&self, op: OperationId, generation: i64) -> Result<bool, StoreError> {
        self.inner.mark_uncertain(op, generation).await
    }

    async fn count_recovery_attempt(&self, op: OperationId) -> Result<Option<u32>, StoreError> {
        self.inner.count_recovery_attempt(op).await
    }

    async fn dead_letter(&self, op: OperationId, reason: &str) -> Result<bool, StoreError> {
        self.inner.dead_letter(op, reason).await
    }

    async fn resolve(&self, op: OperationId, resolution: &Resolution) -> Result<bool, StoreError> {
        self.inner.resolve(op, resolution).await
    }

    async fn operation(&self, op: OperationId) -> Result<Option<OperationRecord>, StoreError> {
        self.inner.operation(op).await
    }

    async fn operations(
        &self,
        filter: OperationFilter,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        self.inner.operations(filter).await
    }

    async fn room_operations(
        &self,
        room: &RoomId,
        status: Option<OperationStatus>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        self.inner.room_operations(room, status).await
    }

    async fn release_lease(&self, op: OperationId, generation: i64) -> Result<bool, StoreError> {
        self.inner.release_lease(op, generation).await
    }
}

#[async_trait]
impl Outbox for Interposed {
    async fn undelivered(&self, limit: usize) -> Result<Vec<OutboxItem>, StoreError> {
        self.inner.undelivered(limit).await
    }

    async fn mark_delivered(&self, id: NotificationId) -> Result<(), StoreError> {
        self.inner.mark_delivered(id).await
    }

    async fn mark_attempt(&self, id: NotificationId) -> Result<(), StoreError> {
        self.inner.mark_attempt(id).await
    }
}

#[async_trait]
impl TokenStore for Interposed {
    async fn insert_token(
        &self,
        record: &TokenRecord,
        hash: &SecretHash,
    ) -> Result<(), TokenError> {
        self.inner.insert_token(record, hash).await
    }

    async fn find_token(
        &self,
        id: &TokenId,
    ) -> Result<Option<(TokenRecord, SecretHash)>, TokenError> {
        self.inner.find_token(id).await
    }

    async fn revoke_token(&self, id: &TokenId, at: Timestamp) -> Result<TokenRecord, TokenError> {
        self.inner.revoke_token(id, at).await
    }

    async fn list_tokens(&self, room: &RoomId) -> Result<Vec<TokenRecord>, TokenError> {
        self.inner.list_tokens(room).await
    }

    async fn revoke_principal_tokens(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
        issued_until: Timestamp,
        at: Timestamp,
    ) -> Result<u64, TokenError> {
        let failing =
            self.failing_token_revocations
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(TokenError::database(
                "revoking a principal's tokens",
                "the token store is down (test)",
            ));
        }
        self.inner
            .revoke_principal_tokens(room, principal, issued_until, at)
            .await
    }
}

#[async_trait]
impl agentroom_ports::PoolStore for Interposed {
    async fn create_pool(
        &self,
        id: &agentroom_ports::domain::ids::PoolId,
        ledger: &agentroom_ports::domain::ledger::BudgetLedger,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.inner.create_pool(id, ledger, at).await
    }

    async fn load_pool(
        &self,
        id: &agentroom_ports::domain::ids::PoolId,
    ) -> Result<Option<agentroom_ports::StoredPool>, StoreError> {
        self.inner.load_pool(id).await
    }

    async fn change_pool(
        &self,
        id: &agentroom_ports::domain::ids::PoolId,
        change: agentroom_ports::PoolChange<'_>,
        at: Timestamp,
    ) -> Result<agentroom_ports::StoredPool, agentroom_ports::PoolChangeError> {
        self.inner.change_pool(id, change, at).await
    }

    async fn pool_log(
        &self,
        id: &agentroom_ports::domain::ids::PoolId,
    ) -> Result<Vec<agentroom_ports::PoolLogEntry>, StoreError> {
        self.inner.pool_log(id).await
    }

    async fn pools(&self) -> Result<Vec<agentroom_ports::domain::ids::PoolId>, StoreError> {
        self.inner.pools().await
    }
}

#[async_trait]
impl agentroom_ports::ArtifactStore for Interposed {
    async fn put_content(
        &self,
        room: &RoomId,
        media_type: &str,
        bytes: &[u8],
        at: Timestamp,
    ) -> Result<
        (
            agentroom_ports::domain::artifact::ContentDigest,
            agentroom_ports::Put,
        ),
        StoreError,
    > {
        self.inner.put_content(room, media_type, bytes, at).await
    }

    async fn content(
        &self,
        room: &RoomId,
        digest: &agentroom_ports::domain::artifact::ContentDigest,
    ) -> Result<Option<agentroom_ports::StoredContent>, StoreError> {
        self.inner.content(room, digest).await
    }
}

// --- the provider -------------------------------------------------------------------------

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

/// One step of a [`Behaviour::Script`].
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant, reason = "a few steps per test")]
pub enum Step {
    /// Answers at once, charged this much.
    Answer(i64),
    /// Ends so.
    Outcome(CallOutcome),
}

/// How a [`TestProvider`] behaves.
pub enum Behaviour {
    /// Returns an answer charged `micros` after `delay`, stopping early when aborted.
    Answer { micros: i64, delay: Duration },
    /// Waits until the test opens the gate ([`TestProvider::gate`]), then returns an answer
    /// charged `micros` whatever the abort says.
    Gated { micros: i64 },
    /// Waits for the abort, then stops.
    UntilAborted,
    /// Plays these steps in order, then answers charged 400.
    Script(Mutex<VecDeque<Step>>),
}

/// What the store held while a call ran: its operation row and the Room.
pub type Observed = (OperationRecord, StoredRoom);

pub struct TestProvider {
    pub behaviour: Behaviour,
    /// Every call that reached it, in order.
    pub requests: Mutex<Vec<CallRequest>>,
    /// The context each call was sent with (C1), in the same order.
    pub contexts: Mutex<Vec<agentroom_ports::CallContext>>,
    pub aborts: Mutex<Vec<AbortReason>>,
    /// A call started (one permit per call).
    pub started: Notify,
    /// Lets a [`Behaviour::Gated`] call return.
    pub gate: Notify,
    /// Read at the start of every call, when set.
    pub observe: Mutex<Option<Arc<Interposed>>>,
    pub observed: Mutex<Vec<Observed>>,
}

impl TestProvider {
    pub fn new(behaviour: Behaviour) -> Arc<TestProvider> {
        Arc::new(TestProvider {
            behaviour,
            requests: Mutex::new(Vec::new()),
            contexts: Mutex::new(Vec::new()),
            aborts: Mutex::new(Vec::new()),
            started: Notify::new(),
            gate: Notify::new(),
            observe: Mutex::new(None),
            observed: Mutex::new(Vec::new()),
        })
    }

    pub fn script(steps: Vec<Step>) -> Arc<TestProvider> {
        Self::new(Behaviour::Script(Mutex::new(steps.into())))
    }

    pub fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// The operations called, in order (one entry per attempt).
    pub fn ops(&self) -> Vec<OperationId> {
        self.requests.lock().unwrap().iter().map(|r| r.op).collect()
    }

    pub fn aborts(&self) -> Vec<AbortReason> {
        self.aborts.lock().unwrap().clone()
    }
}

#[async_trait]
impl Provider for TestProvider {
    async fn call(
        &self,
        request: &CallRequest,
        context: &agentroom_ports::CallContext,
        abort: Abort,
    ) -> CallOutcome {
        self.requests.lock().unwrap().push(request.clone());
        self.contexts.lock().unwrap().push(context.clone());
        let store = self.observe.lock().unwrap().clone();
        if let Some(store) = store {
            let record = store.operation(request.op).await.unwrap().unwrap();
            let room = store.load(&record.room).await.unwrap().unwrap();
            self.observed.lock().unwrap().push((record, room));
        }
        self.started.notify_one();
        match &self.behaviour {
            Behaviour::Answer { micros, delay } => {
                tokio::select! {
                    () = tokio::time::sleep(*delay) => CallOutcome::Returned(answer(request, *micros)),
                    reason = abort.aborted() => {
                        self.aborts.lock().unwrap().push(reason);
                        CallOutcome::Aborted
                    }
                }
            }
            Behaviour::Gated { micros } => {
                self.gate.notified().await;
                CallOutcome::Returned(answer(request, *micros))
            }
            Behaviour::UntilAborted => {
                let reason = abort.aborted().await;
                self.aborts.lock().unwrap().push(reason);
                CallOutcome::Aborted
            }
            Behaviour::Script(steps) => {
                let next = steps.lock().unwrap().pop_front();
                match next.unwrap_or(Step::Answer(400)) {
                    Step::Answer(micros) => CallOutcome::Returned(answer(request, micros)),
                    Step::Outcome(outcome) => outcome,
                }
            }
        }
    }
}

/// Answers with a fixed outcome and counts how often it was asked.
pub struct TestReconciler {
    pub outcome: Mutex<Option<Reconciliation>>,
    pub asked: AtomicU32,
}

impl TestReconciler {
    pub fn new(outcome: Option<Reconciliation>) -> Arc<TestReconciler> {
        Arc::new(TestReconciler {
            outcome: Mutex::new(outcome),
            asked: AtomicU32::new(0),
        })
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
        Ok(self.outcome.lock().unwrap().clone())
    }
}

// --- the Room -------------------------------------------------------------------------------

/// A Room (owner `olive`, operator `oscar`, limit 1,000,000 micros, reasoner quote 1,000) in
/// an [`Interposed`] in-memory store, run by a coordinator over a [`TestProvider`] and a
/// [`TestReconciler`] that confirms nothing.
pub struct Room {
    pub store: Arc<Interposed>,
    pub provider: Arc<TestProvider>,
    pub reconciler: Arc<TestReconciler>,
    pub coordinator: Coordinator,
    room: RoomId,
    posted: u128,
}

impl Room {
    /// The Room `name`, its calls run by a coordinator with `config`.
    pub async fn new(name: &str, provider: Arc<TestProvider>, config: CoordinatorConfig) -> Room {
        let store = Interposed::new();
        let reconciler = TestReconciler::new(None);
        let coordinator = Self::coordinator_on(&store, &provider, &reconciler, config);
        coordinator.recover().await.unwrap();
        let state = RoomState::new(RoomSetup {
            room: RoomId::parse(name).unwrap(),
            owner: p("olive"),
            policy: RoomPolicy::default(),
            access: AccessPolicy::default(),
            quotes: Quotes {
                reasoner: UsdMicros::new(1_000),
                specialist: UsdMicros::new(2_000),
                reviewer: UsdMicros::new(500),
            },
            limit: UsdMicros::new(1_000_000),
        })
        .unwrap();
        coordinator.create_room(&state).await.unwrap();
        coordinator
            .change_membership(
                state.room(),
                InputId::named("grant oscar operator"),
                p("olive"),
                p("oscar"),
                Role::Operator,
                MembershipChange::Grant,
            )
            .await
            .unwrap();
        Room {
            store,
            provider,
            reconciler,
            coordinator,
            room: state.room().clone(),
            posted: 0,
        }
    }

    fn coordinator_on(
        store: &Arc<Interposed>,
        provider: &Arc<TestProvider>,
        reconciler: &Arc<TestReconciler>,
        config: CoordinatorConfig,
    ) -> Coordinator {
        Coordinator::builder(Arc::clone(store) as _, config)
            .provider(Arc::clone(provider) as _)
            .reconciler(Arc::clone(reconciler) as _)
            .build()
    }

    /// Another process on the same store, provider and reconciler (e.g. the next host after
    /// a restart, or another writer).
    pub fn another(&self, config: CoordinatorConfig) -> Coordinator {
        Self::coordinator_on(&self.store, &self.provider, &self.reconciler, config)
    }

    pub fn id(&self) -> RoomId {
        self.room.clone()
    }

    /// The owner posts `text`: the reasoner call the decision reserved (one) and the
    /// revision it committed (transaction 1).
    pub async fn post(&mut self, text: &str) -> (OperationId, Revision) {
        self.posted += 1;
        let event = Event {
            id: EventId::from_uuid(uuid::Uuid::from_u128(0xD0C_0000 + self.posted)),
            room: self.id(),
            author: p("olive"),
            body: EventBody::OwnerMessage {
                text: text.to_owned(),
            },
        };
        match self.coordinator.post(&event).await.unwrap() {
            Outcome::Decided {
                revision, calls, ..
            } => {
                assert_eq!(calls.len(), 1, "one reasoner call: {calls:?}");
                (calls[0], revision)
            }
            other => panic!("not decided: {other:?}"),
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

    pub async fn ledger(&self) -> Vec<LedgerEntry> {
        self.store.ledger(&self.id()).await.unwrap()
    }

    /// The ledger rows replay to the stored balances (B7); the balances.
    pub async fn assert_ledger_replays(&self) -> Balances {
        let balances = self.balances().await;
        let rows = self.ledger().await;
        assert_eq!(BudgetLedger::replay(&rows).unwrap().balances(), balances);
        balances
    }

    /// Another writer asks the running call `op` to abort (D3), as a control decision would:
    /// a commit of the Room as it is that sets the operation's cancel flag.
    pub async fn cancel_elsewhere(store: &Interposed, room: &RoomId, op: OperationId) {
        let stored = store.load(room).await.unwrap().unwrap();
        let mut commit = Commit::state(
            &stored.state,
            &stored.state,
            Timestamp::from_millis(1_764_460_800_000),
            "control",
        );
        commit.cancellations.push(op);
        store.commit(room, stored.revision, commit).await.unwrap();
    }
}

/// The ledger rows about `op`.
pub fn rows_of(rows: &[LedgerEntry], op: OperationId) -> Vec<LedgerEntry> {
    rows.iter()
        .filter(|r| match r {
            LedgerEntry::Reserved { op: o, .. }
            | LedgerEntry::MarkedUncertain { op: o }
            | LedgerEntry::Settled { op: o, .. }
            | LedgerEntry::Released { op: o, .. } => *o == op,
            _ => false,
        })
        .cloned()
        .collect()
}
