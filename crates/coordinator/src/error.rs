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

/// What a [`CoordinatorError`] means to a caller of an edge (REST, MCP): each edge maps these
/// classes to its own codes, so every edge says the same thing about the same refusal.
#[derive(Debug)]
pub enum ErrorClass {
    /// Something the request names is not in the caller's Room.
    NotFound(String),
    /// What the request names is not in a state it applies to (or another decision took it
    /// first); nothing changed.
    WrongState(String),
    /// The request's content does not fit (a blank text, an unknown source, a bad result).
    Invalid(String),
    /// The caller may not do this to what it names (another specialist's assignment or task).
    Refused(String),
    /// The Room refuses what an event says, by a rule of its kind.
    EventRefused(agentroom_ports::domain::event::EventRefusal),
    /// The Room kept changing under the request; retry.
    Conflicted(CoordinatorError),
    /// The host cannot take it now (shutting down, no randomness); retry.
    Unavailable(CoordinatorError),
    /// A revocation committed but revoking its tokens failed; the same request finishes it.
    TokensNotRevoked {
        /// The revoked principal.
        principal: PrincipalId,
        /// The revision that committed the revocation.
        revision: Revision,
        /// Why revoking its tokens failed.
        source: TokenError,
    },
    /// A bug or a failing store: logged, not told.
    Internal(CoordinatorError),
}

impl CoordinatorError {
    /// What this error means to a caller, with the words it is told.
    pub fn classify(self) -> ErrorClass {
        use CoordinatorError as E;
        match self {
            E::UnknownRoom(room) => ErrorClass::NotFound(format!("no room {room}")),
            E::UnknownEvent { event, .. } => ErrorClass::NotFound(format!("no event {event}")),
            E::WrongRoom { event, .. } => {
                ErrorClass::NotFound(format!("no event {event} in this room"))
            }
            E::Input(InputError::UnknownObjective(id)) => {
                ErrorClass::NotFound(format!("no objective {id} in this room"))
            }
            E::Input(error @ InputError::NotOpen(_)) => ErrorClass::NotFound(error.to_string()),
            // A race lost to another decision on the same held result or pending message
            // (readmit against discard, two retries): the request was fine when it was read,
            // the Room moved on; a conflict, not a bad body.
            E::Input(error @ (InputError::NothingHeld(_) | InputError::NotPending(_))) => {
                ErrorClass::WrongState(format!(
                    "{error}: another decision took it first; reload and look again"
                ))
            }
            E::Input(error) => ErrorClass::Invalid(error.to_string()),
            E::Content(error) => ErrorClass::Invalid(error.to_string()),
            E::EventRefused(refusal) => ErrorClass::EventRefused(refusal),
            error @ E::NothingServed => ErrorClass::WrongState(error.to_string()),
            E::NoAssignment(op) => ErrorClass::NotFound(format!("no assignment of operation {op}")),
            error @ (E::NoReportVersion { .. } | E::NoTask { .. }) => {
                ErrorClass::NotFound(error.to_string())
            }
            E::InvalidResult(message) => ErrorClass::Invalid(message),
            error @ E::UnknownEvidenceSource { .. } => ErrorClass::Invalid(error.to_string()),
            error @ E::NotYourTask { .. } => ErrorClass::Refused(error.to_string()),
            E::Submit(SubmitError::NotYours { op, .. }) => ErrorClass::Refused(format!(
                "operation {op} is assigned to another specialist; only its own specialist may \
                 submit its result"
            )),
            E::Submit(
                error @ (SubmitError::AlreadySubmitted { .. } | SubmitError::NotWaiting { .. }),
            ) => ErrorClass::WrongState(error.to_string()),
            error @ E::Conflicted { .. } => ErrorClass::Conflicted(error),
            error @ (E::ActorStopped(_) | E::NoRandomness(_)) => ErrorClass::Unavailable(error),
            E::TokensNotRevoked {
                principal,
                revision,
                source,
                ..
            } => ErrorClass::TokensNotRevoked {
                principal,
                revision,
                source,
            },
            other => ErrorClass::Internal(other),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic, reason = "tests")]
mod tests {
    use agentroom_ports::domain::ids::{OperationId, PrincipalId, RoomId};

    use super::*;

    fn op() -> OperationId {
        OperationId::from_uuid(uuid::Uuid::from_u128(7))
    }

    /// Every edge says the same about the same refusal: the class and its words are decided
    /// here, once (REST's codes and MCP's tool errors both map these classes).
    #[test]
    fn t3_one_classification_for_every_edge() {
        let lab = RoomId::parse("lab").unwrap();
        match CoordinatorError::UnknownRoom(lab.clone()).classify() {
            ErrorClass::NotFound(message) => assert_eq!(message, "no room lab"),
            other => panic!("{other:?}"),
        }
        match CoordinatorError::Input(InputError::NothingHeld(op())).classify() {
            ErrorClass::WrongState(message) => {
                assert!(
                    message.contains("another decision took it first"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        let not_yours = CoordinatorError::Submit(SubmitError::NotYours {
            op: op(),
            principal: PrincipalId::parse("sue").unwrap(),
        });
        match not_yours.classify() {
            ErrorClass::Refused(message) => assert!(
                message.ends_with("only its own specialist may submit its result"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            CoordinatorError::ActorStopped(lab).classify(),
            ErrorClass::Unavailable(_)
        ));
        assert!(matches!(
            CoordinatorError::NoAssignment(op()).classify(),
            ErrorClass::NotFound(_)
        ));
    }
}
