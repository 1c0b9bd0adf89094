//! The room loop: accept a persisted event by id (T1), let the domain decide, commit with
//! compare-and-swap (on a conflict reload and decide again, bounded), and run the effects
//! through `crates/workflows`. One actor per Room per process serializes the Room's decisions
//! here; across processes compare-and-swap decides.
//!
//! Every decision derives its ids from the persisted input ([`InputId`], `ids`), so a retry
//! after a conflict or a crash derives the same operation ids and the store's idempotent
//! inserts absorb it. Calls a decision reserves are committed with this process's lease
//! (transaction 1) and run by the workflow [`Runner`](agentroom_workflows::Runner), which
//! says what became of each call as the domain's call events; the coordinator decides them
//! (`calls`), committing a returned call's receipt with the decision it settles, and that
//! decision may reserve the next calls — until the Room is quiet. Authorization is checked
//! again at each effect sink the domain cannot see (T3), by the domain's predicates over the
//! Room as stored now: before a call is sent (the principal may have lost its role since the
//! commit) and before a notification is delivered; the domain itself checks it before
//! dispatch and before it applies a result (T2).

mod actor;
mod background;
mod calls;
mod context;
mod defaults;
mod desk;
mod error;
mod ids;
mod members;
mod memory;
mod notify;
mod plans;
mod pools;
mod queries;
mod redaction;
mod reviews;
mod setup;
mod shutdown;
mod signals;
mod tasks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentroom_ports::domain::archive::RecordKey;
use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::catalog::{CapabilityCatalog, MemoryCatalog};
use agentroom_ports::domain::engine::{
    ControlAction, Effect, Input, LateDecision, LogEntry, MemberChange, MembershipChange,
    MemoryChange,
};
use agentroom_ports::domain::event::Event;
use agentroom_ports::domain::ids::{
    ContributionId, EventId, ObjectiveId, OperationId, PoolId, PrincipalId, RoomId, TaskIdentity,
};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::plan::Column;
use agentroom_ports::domain::policy::AccessPolicy;
use agentroom_ports::domain::redaction::RedactionTarget;
use agentroom_ports::domain::review::ReviewSubmission;
use agentroom_ports::domain::room::Role;
use agentroom_ports::domain::state::{RoomState, Served};
use agentroom_ports::{
    ArtifactStore, Clock, CommitError, HostedDesk, Notifier, Outbox, PoolStore, Random, Reconciler,
    Revision, RoomStore, StoreError, StoredRoom, SystemClock, SystemRandom, TokenStore,
    WorkflowStore,
};
use agentroom_workflows::{Provider, RecoveryReport, Runner};
use tokio::sync::{mpsc, oneshot, watch};

/// The runner's settings, part of [`CoordinatorConfig`].
pub use agentroom_workflows::RunnerConfig;
pub use background::{Admission, BackgroundConfig, Coordinated, Pass};
pub use desk::{ReportedResult, ReportedSource};
pub use error::{CoordinatorError, ErrorClass};
pub use ids::InputId;
pub use members::{MemberAdded, TokenTerms};
pub use notify::CollectingNotifier;
pub use plans::board;
pub use pools::PoolAudit;
pub use queries::{BudgetBreakdown, ResolveOutcome};
pub use reviews::{ContributionContent, HumanReview, SourceContent, SourceKind};
pub use setup::{FirstToken, NewMember};
pub use shutdown::ShutdownReport;
pub use signals::{AssignmentSignal, Correction, CorrectionHistory};
pub use tasks::TaskUpdate;

use actor::{Command, Guard};
use ids::IdSeed;

/// How the coordinator runs.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    runner: RunnerConfig,
    conflict_retries: u32,
    backoff: Duration,
    outbox_batch: usize,
}

impl CoordinatorConfig {
    /// Calls run under `runner`'s leases; 8 reloads after a conflict, jittered backoff from
    /// 5 ms; outbox passes of 64.
    pub fn new(runner: RunnerConfig) -> Self {
        Self {
            runner,
            conflict_retries: 8,
            backoff: Duration::from_millis(5),
            outbox_batch: 64,
        }
    }

    /// How often a decision is retried after losing the compare-and-swap, and the base of its
    /// jittered backoff.
    pub fn with_conflict_retries(mut self, retries: u32, backoff: Duration) -> Self {
        self.conflict_retries = retries;
        self.backoff = backoff;
        self
    }

    /// For a command that runs no call of its own (create a Room, issue a token, record an
    /// event): a runner named `name` with a 30 s lease.
    pub fn for_command(name: &str) -> Self {
        Self::new(RunnerConfig::new(name, Duration::from_secs(30)))
    }

    /// The runner's settings.
    pub fn runner(&self) -> &RunnerConfig {
        &self.runner
    }
}

/// Builds the one [`Coordinator`] of a process from its store and configuration; every other
/// port has a default a command that only reads or records needs: no agents (every call is
/// refused, nothing is sent), nobody to confirm uncertain calls, the system clock and
/// randomness, an empty capability catalog, notifications only traced.
pub struct CoordinatorBuilder {
    store: Arc<dyn Store>,
    config: CoordinatorConfig,
    provider: Arc<dyn Provider>,
    reconciler: Arc<dyn Reconciler>,
    clock: Arc<dyn Clock>,
    random: Arc<dyn Random>,
    catalog: Arc<dyn CapabilityCatalog + Send + Sync>,
    notifier: Arc<dyn Notifier>,
    desk: Option<Arc<dyn HostedDesk>>,
    served: Option<Served>,
}

impl CoordinatorBuilder {
    /// The models this host serves each role with (B6): a Room whose quote for a role is
    /// below its model's admits no call of that role, and says why.
    pub fn served(mut self, served: Served) -> Self {
        self.served = Some(served);
        self
    }

    /// The desk of the specialists whose work agent hosts execute (`serve --hosted`).
    pub fn desk(mut self, desk: Arc<dyn HostedDesk>) -> Self {
        self.desk = Some(desk);
        self
    }

    /// What executes calls (the agents' router).
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = provider;
        self
    }

    /// What confirms uncertain calls (D2).
    pub fn reconciler(mut self, reconciler: Arc<dyn Reconciler>) -> Self {
        self.reconciler = reconciler;
        self
    }

    /// The host's clock (leases use the database's).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Where fresh ids and token secrets come from.
    pub fn random(mut self, random: Arc<dyn Random>) -> Self {
        self.random = random;
        self
    }

    /// The capability catalog the engine resolves through.
    pub fn catalog(mut self, catalog: Arc<dyn CapabilityCatalog + Send + Sync>) -> Self {
        self.catalog = catalog;
        self
    }

    /// Where notifications leave the outbox to (T5).
    pub fn notifier(mut self, notifier: Arc<dyn Notifier>) -> Self {
        self.notifier = notifier;
        self
    }

    /// The coordinator. Call [`Coordinator::recover`] before posting, so calls a previous
    /// process left are classified first (D2, D6).
    pub fn build(self) -> Coordinator {
        let (in_flight, _) = watch::channel(0);
        let runner = calls::runner(&self);
        Coordinator {
            shared: Arc::new(Shared {
                store: self.store,
                runner,
                clock: self.clock,
                random: self.random,
                catalog: self.catalog,
                notifier: self.notifier,
                desk: self.desk,
                served: self.served,
                config: self.config,
                rooms: Mutex::new(HashMap::new()),
                latest: Mutex::new(HashMap::new()),
                events: Mutex::new(HashMap::new()),
                in_flight,
                watchers: Mutex::new(Vec::new()),
                commits: tokio::sync::Notify::new(),
                gate: shutdown::Gate::default(),
                pool_scan: pools::PoolScan::default(),
                running: shutdown::RunningCalls::default(),
            }),
        }
    }
}

/// What an input's decision did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Decided and committed.
    Decided {
        /// The Room's revision after the commit.
        revision: Revision,
        /// The decision log: what was accepted or rejected, by which rule.
        log: Vec<LogEntry>,
        /// Calls the decision reserved, now running in this process.
        calls: Vec<OperationId>,
    },
    /// It was decided before (an event accepted once, T1; an outcome applied already):
    /// nothing was written.
    AlreadyDone,
    /// This operator input (its [`InputId`]) was decided before, by the commit that made
    /// `revision`: nothing was written now.
    AlreadyDecided {
        /// The revision of the original decision.
        revision: Revision,
        /// The original decision's log.
        log: Vec<LogEntry>,
    },
}

impl Outcome {
    /// The decision log (the original one when the input was decided before; empty when
    /// it was done before).
    pub fn log(&self) -> &[LogEntry] {
        match self {
            Outcome::Decided { log, .. } | Outcome::AlreadyDecided { log, .. } => log,
            Outcome::AlreadyDone => &[],
        }
    }
}

/// A committed decision, as watchers see it (timelines, event streams).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The Room.
    pub room: RoomId,
    /// Its revision after the commit.
    pub revision: Revision,
    /// The kind of input decided (`event_accepted`, `call_returned`, …).
    pub input: &'static str,
    /// The decision log.
    pub log: Vec<LogEntry>,
    /// The effects it committed.
    pub effects: Vec<Effect>,
}

/// Events a process keeps for calls' contexts before it starts again from none.
const EVENTS_KEPT: usize = 4096;

pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    /// Runs the calls decisions reserve, and recovery (over the provider and reconciler).
    pub(crate) runner: Runner,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) random: Arc<dyn Random>,
    pub(crate) catalog: Arc<dyn CapabilityCatalog + Send + Sync>,
    pub(crate) notifier: Arc<dyn Notifier>,
    /// The hosted specialists' calls waiting here for agent hosts, if any.
    pub(crate) desk: Option<Arc<dyn HostedDesk>>,
    /// What this host serves each role with (B6), when it said.
    pub(crate) served: Option<Served>,
    pub(crate) config: CoordinatorConfig,
    rooms: Mutex<HashMap<RoomId, mpsc::Sender<Command>>>,
    /// Each Room's state as its actor last committed or loaded it (issue 21: the call sink
    /// reads the Room's revision, not its whole state, while this is still the stored one).
    latest: Mutex<HashMap<RoomId, Arc<StoredRoom>>>,
    /// Events read for calls' contexts (C1): a persisted event never changes (T1) and is
    /// never redacted, so an owner's message is read once, not once per call.
    events: Mutex<HashMap<EventId, Arc<Event>>>,
    pub(crate) in_flight: watch::Sender<usize>,
    watchers: Mutex<Vec<mpsc::UnboundedSender<Committed>>>,
    /// Woken by every commit this process makes: the background loop delivers the outbox
    /// without polling (issue 21).
    pub(crate) commits: tokio::sync::Notify,
    /// Closed by a graceful stop: no input is decided after it.
    pub(crate) gate: shutdown::Gate,
    /// The calls running in this process, for a graceful stop to release.
    pub(crate) running: shutdown::RunningCalls,
    /// What the background passes know of which Rooms draw on a pool (B8), so that a pass
    /// reads only those, and every Room once in [`pools::POOL_SCAN_EVERY`] passes.
    pub(crate) pool_scan: pools::PoolScan,
}

/// The coordinator of one process: one actor per Room, calls run through workflows. Cheap to
/// clone; clones share the actors.
pub struct Coordinator {
    shared: Arc<Shared>,
}

impl Clone for Coordinator {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Everything the coordinator stores: Rooms and their history, operations, the outbox and
/// bearer tokens. Both store crates implement it whole.
pub trait Store:
    RoomStore + WorkflowStore + Outbox + TokenStore + ArtifactStore + PoolStore + 'static
{
}
impl<T: RoomStore + WorkflowStore + Outbox + TokenStore + ArtifactStore + PoolStore + 'static> Store
    for T
{
}

impl Coordinator {
    /// A builder over `store`, run by `config`; the other ports have defaults
    /// ([`CoordinatorBuilder`]).
    pub fn builder(store: Arc<dyn Store>, config: CoordinatorConfig) -> CoordinatorBuilder {
        CoordinatorBuilder {
            store,
            config,
            provider: Arc::new(defaults::NoAgents),
            reconciler: Arc::new(defaults::NobodyKnows),
            clock: Arc::new(SystemClock),
            random: Arc::new(SystemRandom),
            catalog: Arc::new(MemoryCatalog::new()),
            notifier: Arc::new(defaults::TracedNotifier),
            desk: None,
            served: None,
        }
    }

    /// Creates a Room from `state` (a fresh ledger); an existing Room is left as it is.
    #[tracing::instrument(skip_all, fields(room = %state.room()))]
    pub async fn create_room(&self, state: &RoomState) -> Result<(), CoordinatorError> {
        match self
            .shared
            .store
            .create(state, self.shared.clock.now())
            .await
        {
            Ok(_) | Err(StoreError::RoomExists(_)) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Recovery on start (D2): receipts recorded and not applied are decided by their Rooms,
    /// expired in-flight calls become uncertain (never replayed), uncertain ones go to the
    /// reconciler and what it confirms is decided; calls the resulting decisions reserve run
    /// in this process.
    #[tracing::instrument(skip_all)]
    pub async fn recover(&self) -> Result<RecoveryReport, CoordinatorError> {
        let recovery = self.shared.runner.recover().await?;
        Ok(self.shared.settle_recovered(recovery).await)
    }

    /// Accepts, in the order they were persisted, the events of `room` that were persisted
    /// but never accepted (a process died between the two steps of [`Coordinator::post`]);
    /// run it on start, after [`Coordinator::recover`]. Returns how many it accepted.
    #[tracing::instrument(skip(self))]
    pub async fn accept_pending(&self, room: &RoomId) -> Result<usize, CoordinatorError> {
        const BATCH: usize = 64;
        let mut accepted = 0;
        loop {
            let pending = self.shared.store.unaccepted_events(room, BATCH).await?;
            let last = pending.len() < BATCH;
            let mut now = 0;
            for event in pending {
                if matches!(self.accept(room, event.id).await?, Outcome::Decided { .. }) {
                    now += 1;
                }
            }
            accepted += now;
            // A batch in which nothing could be accepted would come back unchanged.
            if last || now == 0 {
                return Ok(accepted);
            }
        }
    }

    /// Persists `event` (T1: its author comes from the caller's authenticated session) and
    /// accepts it by id; posting it again is accepted once.
    #[tracing::instrument(skip_all, fields(room = %event.room, event = %event.id))]
    pub async fn post(&self, event: &Event) -> Result<Outcome, CoordinatorError> {
        self.checked(event).await?;
        // Issue 21: persisted by the commit that accepts it, one commit instead of two. An
        // event stored already (a client's retry, or another process) is not written again:
        // it is persisted the checked way, which refuses other content under its id, and
        // accepted (answered with its first decision when it was).
        let (room, id) = (event.room.clone(), event.id);
        let persisted = self
            .shared
            .submit(
                &room,
                Input::EventAccepted(event.clone()),
                IdSeed::Event(id),
                Guard::Persist,
            )
            .await;
        match persisted {
            // Stored already; or the Room kept moving under this process's decisions (other
            // processes): persisted now, so that it is not lost, and accepted the checked way
            // (whatever that last attempt answers, a pass accepts a stored event later).
            Err(
                CoordinatorError::Commit(CommitError::EventStored { .. })
                | CoordinatorError::Conflicted { .. },
            ) => {
                self.append(event).await?;
                self.accept_stored(event.clone()).await
            }
            other => other,
        }
    }

    /// Persists `event` (T1: its author comes from the caller's authenticated session) after
    /// the checks [`Coordinator::post`] makes, without deciding it: for an edge in a process
    /// that runs no agents (`agentroom mcp --stdio`), whose events the host coordinating the
    /// Room accepts by id. Recording it again is a no-op; other content under its id is
    /// refused.
    #[tracing::instrument(skip_all, fields(room = %event.room, event = %event.id))]
    pub async fn record(&self, event: &Event) -> Result<(), CoordinatorError> {
        self.store_checked(event).await
    }

    /// What [`Coordinator::post`] and [`Coordinator::record`] check and store.
    async fn store_checked(&self, event: &Event) -> Result<(), CoordinatorError> {
        self.checked(event).await?;
        self.append(event).await
    }

    /// Persists `event`: stored now, or found stored with the same content (a different one
    /// under the same id is refused). The stored event is `event`, so it is accepted without
    /// reading it back.
    async fn append(&self, event: &Event) -> Result<(), CoordinatorError> {
        self.shared
            .store
            .append_event(event, self.shared.clock.now())
            .await?;
        Ok(())
    }

    /// What [`Coordinator::post`] and [`Coordinator::record`] check before an event is
    /// stored.
    async fn checked(&self, event: &Event) -> Result<(), CoordinatorError> {
        // A stopping host persists nothing new (a client's retry goes to a live one).
        if self.shared.gate.closed() {
            return Err(CoordinatorError::ActorStopped(event.room.clone()));
        }
        // A blank owner message is refused before anything is stored (it would start a paid
        // reasoner call that can only ask what was meant).
        event
            .body
            .check()
            .map_err(agentroom_ports::domain::engine::InputError::from)?;
        // What the Room refuses as it is now (a correction of a completed objective, a wait
        // acknowledged by another than the assignee, …) is refused before it is stored, so
        // it changes nothing; the engine decides it again when it accepts the event. An
        // event stored already (a client's retry under the same Idempotency-Key) is not
        // checked again: it was taken, and the Room may have moved on since (the correction
        // completed its objective); `append_event` still refuses other content under its id,
        // and accepting it answers with its first decision. Should the Room move between
        // this check and the decision, the engine's own check refuses it in the decision
        // log: a 202 with `accepted: false`, not a 4xx.
        if event.body.is_checked_against_the_room()
            && self
                .shared
                .store
                .event(&event.room, event.id)
                .await?
                .is_none()
        {
            let stored = self.room(&event.room).await?;
            // An objective that closed and left the live state is judged by its record.
            let mut records = Vec::new();
            if let Some(objective) = event.body.objective()
                && stored.state.objective(objective).is_none()
            {
                records.extend(
                    self.shared
                        .store
                        .objective_record(&event.room, objective)
                        .await?,
                );
            }
            stored
                .state
                .admits_event_with(&event.author, &event.body, &records)
                .map_err(CoordinatorError::EventRefused)?;
        }
        Ok(())
    }

    /// Accepts the persisted event `id` of `room` (T1): resolved from the store, never from
    /// the caller's copy.
    #[tracing::instrument(skip(self))]
    pub async fn accept(&self, room: &RoomId, id: EventId) -> Result<Outcome, CoordinatorError> {
        let event = self.shared.store.event(room, id).await?.ok_or_else(|| {
            CoordinatorError::UnknownEvent {
                room: room.clone(),
                event: id,
            }
        })?;
        if &event.room != room {
            return Err(CoordinatorError::WrongRoom {
                event: id,
                event_room: event.room,
                room: room.clone(),
            });
        }
        self.accept_stored(event).await
    }

    /// Accepts `event`, which the store holds as it is (T1).
    async fn accept_stored(&self, event: Event) -> Result<Outcome, CoordinatorError> {
        let (room, id) = (event.room.clone(), event.id);
        self.shared
            .submit(
                &room,
                Input::EventAccepted(event),
                IdSeed::Event(id),
                Guard::None,
            )
            .await
    }

    /// Decides an operator or control input persisted as `id`: control, late results, limit
    /// raises, overrun acknowledgements, human reviews, task updates, membership changes.
    /// Call outcomes are the runner's and recovery's, not this method's.
    ///
    /// Each input id is decided once per Room, durably: a retry of `id` — in this process,
    /// after a restart, or from another process on the same store — is answered with the
    /// original decision ([`Outcome::AlreadyDecided`]) and changes nothing. The store's
    /// unique input id in the commit guarantees it; the look-up first only spares deciding.
    pub async fn submit(
        &self,
        room: &RoomId,
        id: InputId,
        input: OperatorInput,
    ) -> Result<Outcome, CoordinatorError> {
        if let Some(before) = self.decided_before(room, id).await? {
            return Ok(before);
        }
        match self
            .shared
            .submit(room, input.into_input(), IdSeed::Input(id), Guard::None)
            .await
        {
            // Another process (or a request racing this one) committed it first.
            Err(CoordinatorError::Commit(CommitError::AlreadyDecided { room, input })) => self
                .decided_before(&room, input)
                .await?
                .ok_or(CoordinatorError::Commit(CommitError::AlreadyDecided {
                    room,
                    input,
                })),
            outcome => outcome,
        }
    }

    /// Whether input `id` was decided in `room` already (a retry of it is answered with
    /// that decision).
    pub async fn input_decided(
        &self,
        room: &RoomId,
        id: InputId,
    ) -> Result<bool, CoordinatorError> {
        Ok(self.shared.store.input_decided(room, id).await?.is_some())
    }

    /// The decision that committed input `id` in `room`, if one did.
    async fn decided_before(
        &self,
        room: &RoomId,
        id: InputId,
    ) -> Result<Option<Outcome>, CoordinatorError> {
        let store = &self.shared.store;
        let Some(revision) = store.input_decided(room, id).await? else {
            return Ok(None);
        };
        let before = Revision(revision.0.saturating_sub(1));
        let log = store
            .history(room, before, 1)
            .await?
            .into_iter()
            .find(|entry| entry.revision == revision)
            .map(|entry| entry.log)
            .unwrap_or_default();
        Ok(Some(Outcome::AlreadyDecided { revision, log }))
    }

    /// Pause, resume or cancel an objective (D3): running calls are asked to abort through
    /// the store's cancel flag, which their heartbeats read.
    pub async fn control(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        objective: ObjectiveId,
        action: ControlAction,
    ) -> Result<Outcome, CoordinatorError> {
        self.submit(
            room,
            id,
            OperatorInput::Control {
                by,
                objective,
                action,
            },
        )
        .await
    }

    /// What this host serves each role with, when it said (B6).
    pub fn served(&self) -> Option<&Served> {
        self.shared.served.as_ref()
    }

    /// Bring the Room's quotes up to what this host serves (B6, an operator's act): calls
    /// that waited for it are admitted. Refused when the host serves no models.
    pub async fn update_quotes(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
    ) -> Result<Outcome, CoordinatorError> {
        let served = self
            .shared
            .served
            .clone()
            .ok_or(CoordinatorError::NothingServed)?;
        self.submit(room, id, OperatorInput::UpdateQuotes { by, served })
            .await
    }

    /// Retry a pending owner message whose interpretation a provider failed: it waited for
    /// attention, and its interpretation is issued again.
    pub async fn retry_message(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        event: EventId,
    ) -> Result<Outcome, CoordinatorError> {
        self.submit(room, id, OperatorInput::RetryMessage { by, event })
            .await
    }

    /// Grant or revoke a role.
    pub async fn change_membership(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        principal: PrincipalId,
        role: Role,
        change: MembershipChange,
    ) -> Result<Outcome, CoordinatorError> {
        self.submit(
            room,
            id,
            OperatorInput::ChangeMembership {
                by,
                principal,
                role,
                change,
            },
        )
        .await
    }

    /// Raise the budget limit (B4).
    pub async fn raise_limit(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        amount: UsdMicros,
    ) -> Result<Outcome, CoordinatorError> {
        self.submit(room, id, OperatorInput::RaiseLimit { by, amount })
            .await
    }

    /// Readmit or discard a result held after a control change (D4).
    pub async fn decide_late_result(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        op: OperationId,
        decision: LateDecision,
    ) -> Result<Outcome, CoordinatorError> {
        self.submit(
            room,
            id,
            OperatorInput::DecideLateResult { by, op, decision },
        )
        .await
    }

    /// Waits until no call runs in this process: the objectives it drives are quiet.
    pub async fn wait_idle(&self) {
        let mut rx = self.shared.in_flight.subscribe();
        // The sender lives in `shared`, which `self` holds: the wait cannot fail.
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Every decision this process commits from now on, in commit order per Room.
    pub fn watch(&self) -> mpsc::UnboundedReceiver<Committed> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.shared
            .watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sender);
        receiver
    }

    /// How many calls run in this process now.
    pub fn calls_in_flight(&self) -> usize {
        *self.shared.in_flight.borrow()
    }

    /// One pass over the outbox: each undelivered notification whose audience is still
    /// authorized (T3) goes to the notifier, and is marked delivered once it took it (T5:
    /// at least once; receivers deduplicate on its id). Returns how many were delivered.
    pub async fn deliver_notifications(&self) -> Result<usize, CoordinatorError> {
        notify::deliver(&self.shared).await
    }

    /// A Room's live state as stored now: its open work, and what the rules keep of closed
    /// objectives whose records left it (issue 21). What is shown of closed objectives reads
    /// from [`Coordinator::room_for_objective`], [`Coordinator::room_for_contribution`] or
    /// [`Coordinator::room_with_history`].
    pub async fn room(&self, room: &RoomId) -> Result<StoredRoom, CoordinatorError> {
        self.shared
            .store
            .load(room)
            .await?
            .ok_or_else(|| CoordinatorError::UnknownRoom(room.clone()))
    }

    /// A Room as stored now, with objective `objective` in it whatever its age: the live
    /// state, plus the objective's record when it is not live (one more read then: it closed
    /// and left, or the Room never had it, and the view has no such objective). A read view,
    /// never decided on ([`RoomState::with_records`]).
    pub async fn room_for_objective(
        &self,
        room: &RoomId,
        objective: ObjectiveId,
    ) -> Result<StoredRoom, CoordinatorError> {
        let stored = self.room(room).await?;
        if stored.state.objective(objective).is_some() {
            return Ok(stored);
        }
        let record = self.shared.store.objective_record(room, objective).await?;
        Ok(stored.with_records(record))
    }

    /// A Room as stored now, with contribution `contribution` in it whatever the age of its
    /// objective: the live state, plus the record of the closed objective it was made for
    /// when it is not live (one more read then). A read view, never decided on.
    pub async fn room_for_contribution(
        &self,
        room: &RoomId,
        contribution: ContributionId,
    ) -> Result<StoredRoom, CoordinatorError> {
        let stored = self.room(room).await?;
        if stored.state.contributions().contains_key(&contribution) {
            return Ok(stored);
        }
        self.with_records_by(stored, room, &RecordKey::Contribution(contribution))
            .await
    }

    /// Whether `room` holds the late result of `op` (D4): live, or kept by the record of the
    /// objective that closed with it (deciding it is then refused by D4).
    pub async fn holds_late_result(
        &self,
        room: &RoomId,
        stored: &StoredRoom,
        op: OperationId,
    ) -> Result<bool, CoordinatorError> {
        if stored.state.held_results().contains_key(&op) {
            return Ok(true);
        }
        let records = self
            .shared
            .store
            .records_by(room, &RecordKey::Held(op))
            .await?;
        Ok(!records.is_empty())
    }

    /// A Room as stored now, with every contribution that names content `digest` in it,
    /// live or made for a closed objective (one more read). A read view, never decided on.
    pub async fn room_for_content(
        &self,
        room: &RoomId,
        digest: &ContentDigest,
    ) -> Result<StoredRoom, CoordinatorError> {
        let stored = self.room(room).await?;
        self.with_records_by(stored, room, &RecordKey::Content(digest.clone()))
            .await
    }

    /// `stored` with the records found by `key` put back.
    async fn with_records_by(
        &self,
        stored: StoredRoom,
        room: &RoomId,
        key: &RecordKey,
    ) -> Result<StoredRoom, CoordinatorError> {
        let records = self.shared.store.records_by(room, key).await?;
        Ok(stored.with_records(records))
    }

    /// A Room as stored now with every closed objective's record put back: what a view of
    /// the Room's whole past reads (its objective list, its spending by objective). It reads
    /// the records a page at a time, so it costs what the Room has held; the Room's path
    /// (deciding, posting, the board's live columns) never reads it.
    pub async fn room_with_history(&self, room: &RoomId) -> Result<StoredRoom, CoordinatorError> {
        let stored = self.room(room).await?;
        let records = self.shared.store.all_objective_records(room).await?;
        Ok(stored.with_records(records))
    }
}

/// An input a person or an agent host submits (not a call outcome, which only the runner
/// and recovery report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperatorInput {
    /// Pause, resume or cancel.
    Control {
        /// Who asks.
        by: PrincipalId,
        /// The objective.
        objective: ObjectiveId,
        /// What to do.
        action: ControlAction,
    },
    /// Readmit or discard a late result (D4).
    DecideLateResult {
        /// Who decides.
        by: PrincipalId,
        /// The operation whose result is held.
        op: OperationId,
        /// The decision.
        decision: LateDecision,
    },
    /// Raise the limit (B4).
    RaiseLimit {
        /// Who raises.
        by: PrincipalId,
        /// By how much.
        amount: UsdMicros,
    },
    /// Acknowledge an overrun (B5).
    AcknowledgeOverrun {
        /// Who acknowledges.
        by: PrincipalId,
    },
    /// A human review.
    RecordReview {
        /// The reviewer.
        by: PrincipalId,
        /// The objective.
        objective: ObjectiveId,
        /// The review.
        review: ReviewSubmission,
    },
    /// A planning task update from an agent.
    UpdateTask {
        /// The agent.
        by: PrincipalId,
        /// The objective.
        objective: ObjectiveId,
        /// The task.
        task: TaskIdentity,
        /// The column it asks for.
        status: Column,
        /// The contribution it claims (T2).
        contribution: Option<ContributionId>,
    },
    /// Bring the Room's quotes up to what the host serves (B6).
    UpdateQuotes {
        /// Who asks.
        by: PrincipalId,
        /// What the host serves.
        served: Served,
    },
    /// Retry a pending owner message a provider failed.
    RetryMessage {
        /// Who asks.
        by: PrincipalId,
        /// The message.
        event: EventId,
    },
    /// Grant or revoke a role.
    ChangeMembership {
        /// Who changes it.
        by: PrincipalId,
        /// Whose membership.
        principal: PrincipalId,
        /// Which role.
        role: Role,
        /// Grant or revoke.
        change: MembershipChange,
    },
    /// Add a member, change a member's roles, or revoke a member (T6).
    ChangeMember {
        /// Who changes it.
        by: PrincipalId,
        /// Whose membership.
        principal: PrincipalId,
        /// What changes.
        change: MemberChange,
    },
    /// Add, correct or retract a memory entry (M1).
    Memory {
        /// Who changes it.
        by: PrincipalId,
        /// What changes.
        change: MemoryChange,
    },
    /// The host's administrator makes the Room draw on a pool, or on none (B8).
    AttachPool {
        /// The pool, or `None`.
        pool: Option<PoolId>,
    },
    /// The pool the Room draws on was raised or acknowledged: waiting work may go ahead.
    PoolChanged,
    /// The host's administrator replaces the Room's access policy (T3).
    ReplaceAccess {
        /// The new policy.
        access: AccessPolicy,
    },
    /// Redact an artifact's content or a memory entry.
    Redact {
        /// Who redacts.
        by: PrincipalId,
        /// What.
        target: RedactionTarget,
        /// Why.
        reason: String,
    },
}

impl OperatorInput {
    fn into_input(self) -> Input {
        match self {
            OperatorInput::Control {
                by,
                objective,
                action,
            } => Input::Control {
                by,
                objective,
                action,
            },
            OperatorInput::DecideLateResult { by, op, decision } => {
                Input::DecideLateResult { by, op, decision }
            }
            OperatorInput::RaiseLimit { by, amount } => Input::RaiseLimit { by, amount },
            OperatorInput::RetryMessage { by, event } => Input::RetryMessage { by, event },
            OperatorInput::UpdateQuotes { by, served } => Input::UpdateQuotes { by, served },
            OperatorInput::AcknowledgeOverrun { by } => Input::AcknowledgeOverrun { by },
            OperatorInput::RecordReview {
                by,
                objective,
                review,
            } => Input::RecordReview {
                by,
                objective,
                review,
            },
            OperatorInput::UpdateTask {
                by,
                objective,
                task,
                status,
                contribution,
            } => Input::UpdateTask {
                by,
                objective,
                task,
                status,
                contribution,
            },
            OperatorInput::ChangeMembership {
                by,
                principal,
                role,
                change,
            } => Input::ChangeMembership {
                by,
                principal,
                role,
                change,
            },
            OperatorInput::ChangeMember {
                by,
                principal,
                change,
            } => Input::ChangeMember {
                by,
                principal,
                change,
            },
            OperatorInput::Memory { by, change } => Input::Memory { by, change },
            OperatorInput::AttachPool { pool } => Input::AttachPool { pool },
            OperatorInput::PoolChanged => Input::PoolChanged,
            OperatorInput::ReplaceAccess { access } => Input::ReplaceAccess { access },
            OperatorInput::Redact { by, target, reason } => Input::Redact { by, target, reason },
        }
    }
}

impl Shared {
    /// Hands `input` to the Room's actor (started on first use) and waits for its decision.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        room: &RoomId,
        input: Input,
        seed: IdSeed,
        guard: Guard,
    ) -> Result<Outcome, CoordinatorError> {
        // Counted until the decision is answered, so a graceful stop waits for it.
        let _admitted = self.gate.enter(room)?;
        let (reply, answer) = oneshot::channel();
        let command = Command {
            input,
            seed,
            guard,
            reply,
        };
        let sender = self.actor(room);
        if sender.send(command).await.is_err() {
            return Err(CoordinatorError::ActorStopped(room.clone()));
        }
        answer
            .await
            .map_err(|_| CoordinatorError::ActorStopped(room.clone()))?
    }

    /// Tells the watchers about a commit; watchers that went away are dropped.
    pub(crate) fn committed(&self, committed: &Committed) {
        self.commits.notify_one();
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|w| w.send(committed.clone()).is_ok());
    }

    /// The event `id` of `room`, read once per process (see `Shared::events`).
    pub(crate) async fn persisted_event(
        &self,
        room: &RoomId,
        id: EventId,
    ) -> Result<Option<Arc<Event>>, StoreError> {
        let known = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned();
        if let Some(event) = known {
            return Ok((&event.room == room).then_some(event));
        }
        let Some(event) = self.store.event(room, id).await? else {
            return Ok(None);
        };
        let event = Arc::new(event);
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if events.len() >= EVENTS_KEPT {
            events.clear();
        }
        events.insert(id, Arc::clone(&event));
        Ok(Some(event))
    }

    /// Keeps `latest` as `room`'s state as its actor last committed or loaded it.
    pub(crate) fn remember_latest(&self, room: &RoomId, latest: &Arc<StoredRoom>) {
        let mut kept = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        match kept.get_mut(room) {
            Some(slot) if Arc::ptr_eq(slot, latest) => {}
            Some(slot) => *slot = Arc::clone(latest),
            None => {
                kept.insert(room.clone(), Arc::clone(latest));
            }
        }
    }

    /// `room` as stored now: the state its actor last committed or loaded while the store
    /// is still at that revision (a read of the revision alone), else loaded (issue 21).
    pub(crate) async fn stored_now(
        &self,
        room: &RoomId,
    ) -> Result<Option<Arc<StoredRoom>>, StoreError> {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room)
            .cloned();
        if let Some(latest) = latest
            && self.store.revision(room).await? == Some(latest.revision)
        {
            return Ok(Some(latest));
        }
        Ok(self.store.load(room).await?.map(Arc::new))
    }

    fn actor(self: &Arc<Self>, room: &RoomId) -> mpsc::Sender<Command> {
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = rooms.get(room).filter(|s| !s.is_closed()) {
            return sender.clone();
        }
        let (sender, receiver) = mpsc::channel(64);
        tokio::spawn(actor::run(Arc::downgrade(self), room.clone(), receiver));
        rooms.insert(room.clone(), sender.clone());
        sender
    }
}
