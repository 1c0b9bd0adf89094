//! The runner: runs one leased operation (the creator's lease from transaction 1, or a claim
//! of an expired lease) under heartbeats and says what became of it. It never decides and
//! never calls back: what it learned is returned as [`Executed`], whose domain
//! [`CallEvent`]s the operation's owner (the coordinator) decides and commits. A receipt the
//! owner could not commit with its decision is recorded alone here, fenced on the generation,
//! for the owner or the next recovery to hand to the Room (D2).

use std::future::Future;
use std::sync::Arc;

use agentroom_ports::domain::engine::{
    CallEvent, CallFailure, CallRequest, FailureKind, Reconciliation,
};
use agentroom_ports::domain::ids::{OperationId, RoomId};
use agentroom_ports::{
    CallContext, ClaimedOperation, OperationRecord, Receipt, ReceiptWrite, Reconciler, StoreError,
    WorkflowStore,
};

use crate::beat::Beater;
use crate::config::RunnerConfig;
use crate::crash::{self, crash_point};
use crate::error::WorkflowError;
use crate::lease::{self, Execution};
use crate::provider::Provider;

/// The generation of the lease an operation's creator takes in transaction 1.
pub const CREATOR_GENERATION: i64 = 1;

/// An operation whose lease the caller holds at `generation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    /// The Room.
    pub room: RoomId,
    /// The call.
    pub request: CallRequest,
    /// The lease generation held.
    pub generation: i64,
}

impl Leased {
    /// An operation its creator leased in transaction 1 ([`CREATOR_GENERATION`]).
    pub fn created(room: RoomId, request: CallRequest) -> Self {
        Self {
            room,
            request,
            generation: CREATOR_GENERATION,
        }
    }

    /// The operation's id.
    pub fn op(&self) -> OperationId {
        self.request.op
    }
}

impl From<ClaimedOperation> for Leased {
    fn from(claimed: ClaimedOperation) -> Self {
        Self {
            room: claimed.record.room,
            request: claimed.record.request,
            generation: claimed.generation,
        }
    }
}

/// What became of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executed {
    /// The provider returned. Nothing is recorded yet: the owner commits the receipt with the
    /// decision it settles, fenced on the generation (DESIGN.md "A durable call", step 4), or,
    /// failing that, has it recorded alone ([`Runner::record_alone`]).
    Returned(Receipt),
    /// Another runner holds the operation: whatever came back is dropped.
    Fenced,
    /// Nothing ran: the provider stayed unreachable for the whole window, refused the
    /// request, or the sink refused it (T3).
    NotSent(CallFailure),
    /// It may have run and has no receipt: marked uncertain (fenced on the generation), its
    /// reservation held, never replayed (D2).
    Uncertain {
        /// Why.
        reason: String,
        /// For a call a control change aborted (D3), what the reconciler confirmed at once,
        /// so a resumed objective goes on and a cancelled one closes without waiting for the
        /// next recovery; `None` when nobody could (it stays uncertain, D2).
        confirmed: Option<Reconciliation>,
    },
}

impl Executed {
    /// The call events the Room decides, in order (none when fenced).
    pub fn events(&self) -> Vec<CallEvent> {
        match self {
            Executed::Returned(receipt) => vec![receipt.event()],
            Executed::Fenced => Vec::new(),
            Executed::NotSent(failure) => vec![CallEvent::NotSent(failure.clone())],
            Executed::Uncertain { reason, confirmed } => {
                let mut events = vec![CallEvent::Uncertain {
                    cause: Some(reason.clone()),
                }];
                events.extend(confirmed.clone().map(CallEvent::Reconciled));
                events
            }
        }
    }
}

/// Runs leased operations and recovers open ones, over the store's operation rows, the
/// provider that executes calls and the reconciler that confirms uncertain ones.
pub struct Runner {
    pub(crate) store: Arc<dyn WorkflowStore>,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) reconciler: Arc<dyn Reconciler>,
    pub(crate) config: RunnerConfig,
    /// The process's one heartbeat for every lease this runner holds (issue 21, item 4).
    beater: Arc<Beater>,
}

impl Runner {
    /// A runner over `store`, calling `provider`, asking `reconciler` about uncertain calls.
    pub fn new(
        store: Arc<dyn WorkflowStore>,
        provider: Arc<dyn Provider>,
        reconciler: Arc<dyn Reconciler>,
        config: RunnerConfig,
    ) -> Self {
        let beater = Arc::new(Beater::new(
            Arc::clone(&store),
            config.lease(),
            config.heartbeat(),
        ));
        Self {
            store,
            provider,
            reconciler,
            config,
            beater,
        }
    }

    /// Its settings.
    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// Runs `leased`, which sees `context` of the Room (C1): calls the provider while
    /// heartbeating (retrying calls that reached nothing, within the window), and says what
    /// became of it. An uncertain call is marked so here.
    pub async fn execute(
        &self,
        leased: &Leased,
        context: &CallContext,
    ) -> Result<Executed, WorkflowError> {
        self.execute_watched(leased, context, &|_| {}).await
    }

    /// [`Runner::execute`], telling `on_wait` once, at its first failure to reach the
    /// provider, why the call waits (the Room shows it: "waiting for the provider").
    #[tracing::instrument(skip_all, fields(op = %leased.op(), generation = leased.generation))]
    pub async fn execute_watched(
        &self,
        leased: &Leased,
        context: &CallContext,
        on_wait: &(dyn Fn(String) + Send + Sync),
    ) -> Result<Executed, WorkflowError> {
        let op = leased.op();
        let generation = leased.generation;
        let execution = lease::execute(
            &self.beater,
            &*self.provider,
            &self.config,
            generation,
            &leased.request,
            context,
            on_wait,
        )
        .await;
        match execution {
            Execution::Returned(receipt) => {
                crash_point(crash::AFTER_CALL);
                Ok(Executed::Returned(receipt))
            }
            Execution::Fenced => {
                tracing::warn!("fenced: another runner holds the operation; result dropped");
                Ok(Executed::Fenced)
            }
            Execution::Uncertain(reason) => self.uncertain(op, generation, reason).await,
            Execution::Unreachable(reason) => {
                tracing::warn!(reason, "nothing reached the provider: giving up");
                Ok(Executed::NotSent(CallFailure::new(
                    FailureKind::Unreachable,
                    reason,
                )))
            }
            Execution::Refused(reason) => {
                tracing::warn!(reason, "the provider refused the call: not retried");
                Ok(Executed::NotSent(CallFailure::new(
                    FailureKind::Refused,
                    reason,
                )))
            }
        }
    }

    async fn uncertain(
        &self,
        op: OperationId,
        generation: i64,
        reason: String,
    ) -> Result<Executed, WorkflowError> {
        tracing::warn!(
            reason,
            "the call is uncertain: reservation held, never replayed"
        );
        if !lease::mark_uncertain(&*self.store, &self.config, op, generation).await? {
            tracing::warn!("marking uncertain was fenced: another runner holds the operation");
            return Ok(Executed::Fenced);
        }
        crash_point(crash::AFTER_UNCERTAIN);
        let record = self.record(op).await?;
        // Not asked to stop (a timeout, a dropped connection): recovery asks the reconciler
        // on its own schedule, as for any uncertain call (D2).
        let confirmed = if record.cancel_requested {
            self.confirm(&record).await
        } else {
            None
        };
        Ok(Executed::Uncertain { reason, confirmed })
    }

    /// What the reconciler confirms about an uncertain call, if anything (D2).
    pub(crate) async fn confirm(&self, record: &OperationRecord) -> Option<Reconciliation> {
        let op = record.op();
        match self.reconciler.reconcile(record).await {
            Ok(Some(outcome)) => {
                tracing::info!(%op, ?outcome, "an uncertain call confirmed");
                Some(outcome)
            }
            Ok(None) => {
                tracing::info!(%op, "nobody can confirm it: it stays uncertain");
                None
            }
            Err(err) => {
                tracing::warn!(%op, %err, "the reconciler failed: it stays uncertain");
                None
            }
        }
    }

    /// Records `receipt` alone, fenced on `leased`'s generation: the owner could not commit
    /// it with its decision (the store failed, the Room did not expect it now, the host is
    /// stopping). `true` when it is recorded at this generation (written now, or found written
    /// by a commit whose answer was lost): then hand it to the Room, or recovery will. `false`
    /// when another runner holds the operation: the result is dropped.
    pub async fn record_alone(
        &self,
        leased: &Leased,
        receipt: &Receipt,
    ) -> Result<bool, WorkflowError> {
        let (op, generation) = (leased.op(), leased.generation);
        let mut written =
            lease::write_receipt(&*self.store, &self.config, op, generation, receipt).await?;
        if written == ReceiptWrite::Fenced {
            // The owner's commit may have gone through after all (its answer lost): then the
            // receipt found is this one, at this generation.
            let mine = self.record(op).await?;
            if mine.generation == generation && mine.receipt.as_ref() == Some(receipt) {
                written = ReceiptWrite::Recorded;
            }
        }
        if written == ReceiptWrite::Fenced {
            tracing::warn!("receipt fenced: another runner holds the operation; result dropped");
            return Ok(false);
        }
        crash_point(crash::AFTER_RECEIPT);
        Ok(true)
    }

    /// Runs a store call with the runner's bounded retries and backoff.
    pub async fn retrying<T, F, Fut>(&self, what: &str, call: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        lease::retrying(&self.config, what, call).await
    }

    pub(crate) async fn record(&self, op: OperationId) -> Result<OperationRecord, WorkflowError> {
        lease::retrying(&self.config, "operation", || self.store.operation(op))
            .await?
            .ok_or(WorkflowError::UnknownOperation(op))
    }
}
