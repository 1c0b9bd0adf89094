//! The runner: runs one leased operation (the creator's lease from transaction 1, or a claim
//! of an expired lease) and gives its receipt to the operation's owner, which commits it with
//! the decision it settles (fenced on the generation, one commit); failing that, the runner
//! records the receipt alone and hands it over. It never decides.

use std::sync::Arc;

use agentroom_ports::domain::engine::CallRequest;
use agentroom_ports::domain::ids::{OperationId, RoomId};
use agentroom_ports::{ClaimedOperation, OperationRecord, ReceiptWrite, WorkflowStore};

use crate::config::RunnerConfig;
use crate::crash::{self, crash_point};
use crate::error::WorkflowError;
use crate::lease::{self, Execution};
use crate::owner::{Delivery, ReceiptOwner};
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

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// The receipt is recorded; `delivered` says whether the owner took it (if not, recovery
    /// hands it over again).
    Receipted {
        /// Whether the owner applied it.
        delivered: bool,
    },
    /// Another runner holds the operation (or it has a receipt already): this run's result,
    /// if any, was dropped.
    Fenced,
    /// It may have run and has no receipt: marked uncertain, reservation held, never replayed.
    Uncertain {
        /// Why.
        reason: String,
    },
    /// Nothing reached the provider after the bounded retries; the owner was told.
    NotSent {
        /// Why.
        reason: String,
    },
}

/// Runs leased operations and recovers open ones.
pub struct Runner<W: ?Sized, P: ?Sized, O: ?Sized> {
    pub(crate) store: Arc<W>,
    pub(crate) provider: Arc<P>,
    pub(crate) owner: Arc<O>,
    pub(crate) config: RunnerConfig,
}

impl<W, P, O> Runner<W, P, O>
where
    W: WorkflowStore + ?Sized,
    P: Provider + ?Sized,
    O: ReceiptOwner + ?Sized,
{
    /// A runner over `store`, calling `provider`, reporting to `owner`.
    pub fn new(store: Arc<W>, provider: Arc<P>, owner: Arc<O>, config: RunnerConfig) -> Self {
        Self {
            store,
            provider,
            owner,
            config,
        }
    }

    /// Its settings.
    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// Runs `leased`: calls the provider while heartbeating, then records and delivers the
    /// receipt, or marks the operation uncertain, or tells the owner it was never sent.
    #[tracing::instrument(skip_all, fields(op = %leased.op(), generation = leased.generation))]
    pub async fn run(&self, leased: Leased) -> Result<RunOutcome, WorkflowError> {
        let op = leased.op();
        let generation = leased.generation;
        let execution = lease::execute(
            &*self.store,
            &*self.provider,
            &self.config,
            generation,
            &leased.request,
        )
        .await;
        match execution {
            Execution::Returned(receipt) => {
                crash_point(crash::AFTER_CALL);
                // The receipt and the decision it settles in one commit, when the owner can.
                let owner_failed = match self.owner.record_and_deliver(&leased, &receipt).await {
                    Ok(Delivery::Recorded) => {
                        // The receipt and its settling decision in one commit.
                        crash_point(crash::AFTER_SETTLE);
                        return Ok(RunOutcome::Receipted { delivered: true });
                    }
                    Ok(Delivery::Fenced) => {
                        tracing::warn!(
                            "receipt fenced: another runner holds the operation; result dropped"
                        );
                        return Ok(RunOutcome::Fenced);
                    }
                    Ok(Delivery::NotTaken) => false,
                    Err(err) => {
                        tracing::warn!(%err, "the owner did not commit the receipt with its decision: recording it alone");
                        true
                    }
                };
                let mut written =
                    lease::write_receipt(&*self.store, &self.config, op, generation, &receipt)
                        .await?;
                if written == ReceiptWrite::Fenced && owner_failed {
                    // The owner's commit may have gone through after all (its answer lost):
                    // then the receipt found is this one, at this generation.
                    let mine = self.record(op).await?;
                    if mine.generation == generation && mine.receipt.as_ref() == Some(&receipt) {
                        written = ReceiptWrite::Recorded;
                    }
                }
                if written == ReceiptWrite::Fenced {
                    tracing::warn!(
                        "receipt fenced: another runner holds the operation; result dropped"
                    );
                    return Ok(RunOutcome::Fenced);
                }
                crash_point(crash::AFTER_RECEIPT);
                let record = self.record(op).await?;
                let delivered = match self.owner.deliver(&record, &receipt, generation).await {
                    Ok(()) => true,
                    Err(err) => {
                        tracing::warn!(%err, "the owner did not take the receipt; recovery will");
                        false
                    }
                };
                Ok(RunOutcome::Receipted { delivered })
            }
            Execution::Fenced => {
                tracing::warn!("fenced: another runner holds the operation; result dropped");
                Ok(RunOutcome::Fenced)
            }
            Execution::Uncertain(reason) => self.uncertain(op, generation, reason).await,
            Execution::NotSent(reason) => {
                tracing::warn!(reason, "nothing reached the provider: giving up");
                let record = self.record(op).await?;
                if let Err(err) = self.owner.not_sent(&record, &reason).await {
                    tracing::warn!(%err, "the owner did not take the unsent call; recovery will");
                }
                Ok(RunOutcome::NotSent { reason })
            }
        }
    }

    async fn uncertain(
        &self,
        op: OperationId,
        generation: i64,
        reason: String,
    ) -> Result<RunOutcome, WorkflowError> {
        tracing::warn!(
            reason,
            "the call is uncertain: reservation held, never replayed"
        );
        if !lease::mark_uncertain(&*self.store, &self.config, op, generation).await? {
            tracing::warn!("marking uncertain was fenced: another runner holds the operation");
            return Ok(RunOutcome::Fenced);
        }
        crash_point(crash::AFTER_UNCERTAIN);
        let record = self.record(op).await?;
        if let Err(err) = self.owner.uncertain(&record).await {
            tracing::warn!(%err, "the owner did not take the uncertain call; recovery will");
        }
        Ok(RunOutcome::Uncertain { reason })
    }

    pub(crate) async fn record(&self, op: OperationId) -> Result<OperationRecord, WorkflowError> {
        lease::retrying(&self.config, "operation", || self.store.operation(op))
            .await?
            .ok_or(WorkflowError::UnknownOperation(op))
    }
}
