//! The coordinator's typed errors.

use agentroom_ports::domain::engine::InputError;
use agentroom_ports::domain::ids::{EventId, RoomId};
use agentroom_ports::{CommitError, StoreError};
use agentroom_workflows::WorkflowError;

/// Why an input was not decided and committed. Nothing was written unless said otherwise.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A commit failed for another reason than a conflict.
    #[error("commit: {0}")]
    Commit(CommitError),
    /// The input cannot concern this Room (another Room's event, an unknown objective or
    /// operation); nothing changed.
    #[error("input: {0}")]
    Input(#[from] InputError),
    /// The Room kept moving under us: every bounded retry lost the compare-and-swap.
    #[error("room {room} still conflicting after {attempts} attempts")]
    Conflicted {
        /// The Room.
        room: RoomId,
        /// How often it tried.
        attempts: u32,
    },
    /// No such Room in the store.
    #[error("no room {0}")]
    UnknownRoom(RoomId),
    /// No such persisted event in the Room (T1: only a persisted event is accepted).
    #[error("no event {event} in room {room}")]
    UnknownEvent {
        /// The Room.
        room: RoomId,
        /// The event.
        event: EventId,
    },
    /// The event names another Room than the one it is posted to.
    #[error("event {event} belongs to room {event_room}, not {room}")]
    WrongRoom {
        /// The event.
        event: EventId,
        /// Its Room.
        event_room: RoomId,
        /// The Room it was posted to.
        room: RoomId,
    },
    /// A workflow step (recovery) failed.
    #[error("workflow: {0}")]
    Workflow(#[from] WorkflowError),
    /// The Room's actor stopped, or refuses new input: the host is shutting down (a graceful
    /// stop decides nothing new, `Coordinator::shutdown`). Nothing was written; try again
    /// (another process, or this one restarted).
    #[error("the actor of room {0} stopped: the host is shutting down")]
    ActorStopped(RoomId),
}
