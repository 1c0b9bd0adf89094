//! The operation's owner (the coordinator; a small consumer in tests): it takes what the runner
//! and recovery learned and lets the domain decide it. The runner never decides.

use agentroom_ports::domain::engine::Reconciliation;
use agentroom_ports::{OperationRecord, Receipt};
use async_trait::async_trait;

use crate::runner::Leased;

/// What an owner did with a receipt the runner had not recorded yet
/// ([`ReceiptOwner::record_and_deliver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Decided, and committed in one commit with the receipt, fenced on its generation.
    Recorded,
    /// The store refused the receipt (another holder's generation, or a receipt exists):
    /// nothing of that commit was written, and the result is dropped.
    Fenced,
    /// Not taken that way (the owner records no receipts itself, or the Room does not expect
    /// this outcome now): the runner records the receipt alone and then calls
    /// [`ReceiptOwner::deliver`].
    NotTaken,
}

/// The owner could not take an outcome now; recovery hands durable outcomes over again.
#[derive(Debug, thiserror::Error)]
#[error("the operation's owner failed: {0}")]
pub struct OwnerError(pub String);

/// Takes the outcomes of operations. Every method may be called again for the same operation
/// (after a crash, or on each recovery), so each must be idempotent: an outcome the Room has
/// applied already is acknowledged, not applied twice.
///
/// A decision an owner commits may create new calls (a failed interpretation is reissued,
/// O11). The owner must commit those with its own lease and run them: committed without a
/// lease they look expired at once, recovery marks them uncertain without calling them, the
/// reconciler finds they never ran, the domain reissues them — and recovery never ends (found
/// by the crash drill).
#[async_trait]
pub trait ReceiptOwner: Send + Sync {
    /// A provider returned `receipt` for `leased` and nothing is recorded yet: decide
    /// `Input::CallReturned` and commit it together with the receipt, fenced on the lease's
    /// generation, and the operation in `Commit::applied`: one transaction, as DESIGN.md "A
    /// durable call, step by step" has it (step 4). A crash before that commit leaves the
    /// operation without a receipt: uncertain (D2). The default takes nothing.
    async fn record_and_deliver(
        &self,
        leased: &Leased,
        receipt: &Receipt,
    ) -> Result<Delivery, OwnerError> {
        let _ = (leased, receipt);
        Ok(Delivery::NotTaken)
    }

    /// A receipt is durably recorded at `generation`: decide `Input::CallReturned` and commit
    /// it with the operation in `Commit::applied`.
    async fn deliver(
        &self,
        record: &OperationRecord,
        receipt: &Receipt,
        generation: i64,
    ) -> Result<(), OwnerError>;

    /// The operation is uncertain (no receipt; reservation held, never replayed, D2): decide
    /// `Input::CallUncertain`.
    async fn uncertain(&self, record: &OperationRecord) -> Result<(), OwnerError>;

    /// A reconciler confirmed an uncertain operation's outcome (D2): decide
    /// `Input::Reconciled` and commit it with the operation in `Commit::applied`.
    async fn reconciled(
        &self,
        record: &OperationRecord,
        outcome: &Reconciliation,
    ) -> Result<(), OwnerError>;

    /// Nothing reached the provider and the bounded retries are spent: the call is known not
    /// to have run. Decide `Input::CallSettled` with a zero charge and commit it with the
    /// operation in `Commit::applied`. If this never commits, the lease expires and recovery
    /// treats the operation as uncertain.
    async fn not_sent(&self, record: &OperationRecord, reason: &str) -> Result<(), OwnerError>;
}
