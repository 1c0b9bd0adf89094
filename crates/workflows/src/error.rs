//! The runner's typed errors.

use agentroom_ports::domain::engine::InputError;
use agentroom_ports::domain::ids::{OperationId, RoomId};
use agentroom_ports::{CommitError, Revision, StoreError};

/// Why a workflow step failed. Whatever is durable stays for recovery.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// The store failed after its bounded retries.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// Transaction 1 lost the compare-and-swap: reload the Room and decide again.
    #[error("room {room} moved to revision {actual} before transaction 1 (expected {expected})")]
    Conflict {
        /// The Room.
        room: RoomId,
        /// What the commit expected.
        expected: Revision,
        /// What is stored.
        actual: Revision,
    },
    /// A commit failed for another reason.
    #[error("commit: {0}")]
    Commit(CommitError),
    /// The Room is not stored.
    #[error("no room {0}")]
    UnknownRoom(RoomId),
    /// The operation is not stored.
    #[error("no operation {0}")]
    UnknownOperation(OperationId),
    /// Deciding the call's outcome failed.
    #[error("deciding the outcome of {op}: {source}")]
    Decide {
        /// The operation.
        op: OperationId,
        /// Why.
        source: InputError,
    },
}

impl From<CommitError> for WorkflowError {
    fn from(err: CommitError) -> Self {
        match err {
            CommitError::Conflict {
                room,
                expected,
                actual,
            } => WorkflowError::Conflict {
                room,
                expected,
                actual,
            },
            CommitError::Store(err) => WorkflowError::Store(err),
            CommitError::UnknownRoom(room) => WorkflowError::UnknownRoom(room),
            other => WorkflowError::Commit(other),
        }
    }
}
