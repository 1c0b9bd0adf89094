//! The runner's typed errors.

use agentroom_ports::StoreError;
use agentroom_ports::domain::ids::OperationId;

/// Why a workflow step failed. Whatever is durable stays for recovery.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// The store failed after its bounded retries.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The operation is not stored.
    #[error("no operation {0}")]
    UnknownOperation(OperationId),
}
