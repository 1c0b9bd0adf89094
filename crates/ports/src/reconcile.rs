//! Confirming what happened to an uncertain call from the provider's own record or external
//! state (D2). Only a confirmed outcome charges or releases its reservation.

use agentroom_domain::engine::Reconciliation;
use async_trait::async_trait;

use crate::workflows::OperationRecord;

/// A reconciler could not ask.
#[derive(Debug, thiserror::Error)]
#[error("reconciliation failed: {0}")]
pub struct ReconcileError(pub String);

/// Asks the outside world what became of an operation.
#[async_trait]
pub trait Reconciler: Send + Sync {
    /// `Some` when the outcome is confirmed; `None` when nobody knows (it stays uncertain).
    async fn reconcile(
        &self,
        operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError>;
}
