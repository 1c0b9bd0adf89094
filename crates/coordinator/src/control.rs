//! Control reaching running calls (D3, D4). A pause or cancel commits `CancelCall` effects:
//! the store raises each operation's cancel flag, the running call's heartbeat reads it and
//! its [`Abort`](agentroom_workflows::Abort) fires. What the call then becomes follows the
//! rules:
//!
//! - it finished anyway: its receipt is delivered as usual; the domain charges its usage and,
//!   because the objective's control revision moved, holds the result until an owner or an
//!   operator readmits or discards it (D4);
//! - it stopped cooperatively: it was sent, so it may have run, and with no receipt it is
//!   uncertain with its whole reservation held (D2). The runner says so; this owner then asks
//!   the [`Reconciler`] at once — the provider's own record — instead of leaving it for the
//!   next recovery, so that a resumed objective can go on and a cancelled one closes with its
//!   reservation charged or released, never a micro lost. A call nobody can confirm stays
//!   uncertain, its reservation held, for the operator (D2).

use std::sync::Arc;

use agentroom_ports::domain::engine::Reconciliation;
use agentroom_ports::{OperationRecord, Receipt, Reconciler};
use agentroom_workflows::{Delivery, Leased, OwnerError, ReceiptOwner};
use async_trait::async_trait;

/// A [`ReceiptOwner`] that settles calls a control change aborted, through the reconciler.
pub(crate) struct SettleAborted<O: ?Sized, R: ?Sized> {
    owner: Arc<O>,
    reconciler: Arc<R>,
}

impl<O: ?Sized, R: ?Sized> SettleAborted<O, R> {
    pub(crate) fn new(owner: Arc<O>, reconciler: Arc<R>) -> Self {
        Self { owner, reconciler }
    }
}

#[async_trait]
impl<O, R> ReceiptOwner for SettleAborted<O, R>
where
    O: ReceiptOwner + ?Sized + 'static,
    R: Reconciler + ?Sized + 'static,
{
    async fn record_and_deliver(
        &self,
        leased: &Leased,
        receipt: &Receipt,
    ) -> Result<Delivery, OwnerError> {
        self.owner.record_and_deliver(leased, receipt).await
    }

    async fn deliver(
        &self,
        record: &OperationRecord,
        receipt: &Receipt,
        generation: i64,
    ) -> Result<(), OwnerError> {
        self.owner.deliver(record, receipt, generation).await
    }

    async fn uncertain(&self, record: &OperationRecord) -> Result<(), OwnerError> {
        self.owner.uncertain(record).await?;
        if !record.cancel_requested {
            // Not asked to stop: a timeout or a dropped connection. Recovery asks the
            // reconciler on its own schedule, as for any uncertain call (D2).
            return Ok(());
        }
        match self.reconciler.reconcile(record).await {
            Ok(Some(outcome)) => {
                tracing::info!(op = %record.op(), ?outcome, "D3: an aborted call confirmed");
                self.owner.reconciled(record, &outcome).await
            }
            Ok(None) => {
                tracing::warn!(op = %record.op(), "D3: an aborted call stays uncertain: nobody can confirm it");
                Ok(())
            }
            Err(err) => {
                tracing::warn!(op = %record.op(), %err, "D3: an aborted call stays uncertain; recovery asks again");
                Ok(())
            }
        }
    }

    async fn reconciled(
        &self,
        record: &OperationRecord,
        outcome: &Reconciliation,
    ) -> Result<(), OwnerError> {
        self.owner.reconciled(record, outcome).await
    }

    async fn not_sent(&self, record: &OperationRecord, reason: &str) -> Result<(), OwnerError> {
        self.owner.not_sent(record, reason).await
    }
}
