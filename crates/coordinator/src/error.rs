//! The coordinator's typed errors.

use agentroom_ports::domain::engine::InputError;
use agentroom_ports::domain::ids::{
    EventId, ObjectiveId, OperationId, PoolId, PrincipalId, RoomId, TaskIdentity,
};
use agentroom_ports::domain::ledger::LedgerError;
use agentroom_ports::domain::room::Role;
use agentroom_ports::{CommitError, NoRandomness, Revision, StoreError, SubmitError, TokenError};
use agentroom_workflows::WorkflowError;

/// Why an input was not decided and committed. Nothing was written unless said otherwise.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// A use case needs the models this host serves, and it serves none (scripted or no
    /// agents).
    #[error("this host serves no models to quote (start `serve --openai CONFIG`)")]
    NothingServed,
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
    /// A Room with that id exists already; nothing changed.
    #[error("room {0} exists already; nothing changed")]
    RoomExists(RoomId),
    /// Granting a new Room's member a role was refused by a rule.
    #[error("granting {principal} the role {} was refused: {message}", role.as_str())]
    GrantRefused {
        /// The member.
        principal: PrincipalId,
        /// The role.
        role: Role,
        /// The rule's message.
        message: String,
    },
    /// The principal holds no role in the Room; nothing was recorded.
    #[error("{principal} is not a member of room {room}; nothing was recorded")]
    NotMember {
        /// The principal.
        principal: PrincipalId,
        /// The Room.
        room: RoomId,
    },
    /// No randomness for an id or a token secret: nothing was made.
    #[error(transparent)]
    NoRandomness(#[from] NoRandomness),
    /// The token store failed.
    #[error("tokens: {0}")]
    Tokens(#[from] TokenError),
    /// T6: the revocation of `principal` was decided and committed at `revision` (its access
    /// is refused already, by membership), but revoking its tokens failed. Retrying the same
    /// input (the same Idempotency-Key) revokes them; so does `agentroom token revoke`.
    #[error(
        "{principal} was revoked from room {room} at revision {}, but revoking its tokens failed \
         ({source}); its access is refused already; retry with the same Idempotency-Key to \
         revoke its tokens",
        revision.0
    )]
    TokensNotRevoked {
        /// The Room.
        room: RoomId,
        /// The revoked principal.
        principal: PrincipalId,
        /// The revision that committed the revocation.
        revision: Revision,
        /// Why revoking its tokens failed.
        #[source]
        source: TokenError,
    },
    /// No hosted specialist call of this Room waits here under that operation.
    #[error("no assignment of operation {0}")]
    NoAssignment(OperationId),
    /// What an agent host reported cannot be a result (a negative usage, a blank failure
    /// reason, a digest that is not one); nothing was recorded.
    #[error("{0}")]
    InvalidResult(String),
    /// The objective has no report of that version.
    #[error("objective {objective} has no report version {version}")]
    NoReportVersion {
        /// The objective.
        objective: ObjectiveId,
        /// The version asked for.
        version: u32,
    },
    /// R7: a verdict's evidence names a source the report version reviewed does not cite;
    /// the review is refused as written and nothing is decided.
    #[error(
        "the verdict on `{criterion}` names source `{source_id}`, which is not a source of report v{version} (its sources: {})",
        if known.is_empty() { "none".to_owned() } else { known.join(", ") }
    )]
    UnknownEvidenceSource {
        /// The criterion whose verdict names it.
        criterion: String,
        /// The source named.
        source_id: String,
        /// The report version reviewed.
        version: u32,
        /// The ids of that version's sources.
        known: Vec<String>,
    },
    /// No task of that identity in the objective's current plan.
    #[error("no task {task} in the current plan of {objective}")]
    NoTask {
        /// The objective.
        objective: ObjectiveId,
        /// The task asked for.
        task: TaskIdentity,
    },
    /// T2: an agent updates only its own tasks; nothing was decided.
    #[error("{principal} may update only its own tasks; {task} is assigned to {assignee}")]
    NotYourTask {
        /// Who asked.
        principal: PrincipalId,
        /// The task.
        task: TaskIdentity,
        /// Its assignee.
        assignee: PrincipalId,
    },
    /// The agent-host desk refused a submission; nothing was recorded.
    #[error(transparent)]
    Submit(#[from] SubmitError),
    /// A submitted contribution's content cannot be kept by the Room (its policy's bounds, an
    /// empty body, malformed sources); nothing was recorded or stored.
    #[error("the contribution is refused: {0}")]
    Content(#[from] agentroom_ports::domain::review::ContributionRefusal),
    /// The Room refuses what the event says, as it is now (`RoomState::admits_event`);
    /// nothing was stored or decided.
    #[error("event refused: {0}")]
    EventRefused(agentroom_ports::domain::event::EventRefusal),
    /// A pool with that id exists already; nothing changed.
    #[error("pool {0} exists already; nothing changed")]
    PoolExists(PoolId),
    /// No such budget pool.
    #[error("no pool {0} (`agentroom pool list` lists the host's pools); nothing changed")]
    UnknownPool(PoolId),
    /// The pool's ledger refused the change (B4, B5: a raise that is not positive, an
    /// acknowledgement without overrun); nothing changed.
    #[error("pool {pool}: {refusal}; nothing changed")]
    PoolRefused {
        /// The pool.
        pool: PoolId,
        /// Why.
        refusal: LedgerError,
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
