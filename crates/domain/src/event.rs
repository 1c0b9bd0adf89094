//! Events: persisted before they are decided, authored by the authenticated principal (T1).

use serde::{Deserialize, Serialize};

use crate::archive::{Archive, NoArchive};
use crate::ids::{EventId, ObjectiveId, PrincipalId, RoomId, TaskIdentity};
use crate::objective::{CriteriaError, Criterion, ObjectiveStatus};
use crate::room::Role;
use crate::rules::Rule;
use crate::state::{OperationState, RoomState};

/// A persisted event. Its author comes from the authenticated session, never from a body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The persisted id the event is accepted by (T1).
    pub id: EventId,
    /// The Room it was posted to.
    pub room: RoomId,
    /// The authenticated author.
    pub author: PrincipalId,
    /// What it says; its kind follows from the body.
    pub body: EventBody,
}

/// Why an event cannot be posted as it is; nothing is stored or decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// An owner message or correction, a receipt's note or a wait's reason that is empty or
    /// only whitespace: it asks the reasoner nothing, so it would pay for a call that can only
    /// answer "what?" (or tells nobody what a task waits on).
    #[error("the {0} text is blank: say what you want")]
    BlankText(EventKind),
}

impl EventBody {
    /// Checks what an event says before it is stored (the service) and again before it is
    /// decided (the engine): a blank text, note or reason is refused.
    pub fn check(&self) -> Result<(), EventError> {
        match self {
            EventBody::OwnerMessage { text } if text.trim().is_empty() => {
                Err(EventError::BlankText(EventKind::OwnerMessage))
            }
            EventBody::OwnerCorrection { text, .. } if text.trim().is_empty() => {
                Err(EventError::BlankText(EventKind::OwnerCorrection))
            }
            // A receipt asks the reasoner about what it notes; a wait says what it waits on.
            EventBody::InternalReceipt { note, .. } if note.trim().is_empty() => {
                Err(EventError::BlankText(EventKind::InternalReceipt))
            }
            EventBody::WaitAck { reason, .. } if reason.trim().is_empty() => {
                Err(EventError::BlankText(EventKind::WaitAck))
            }
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A message from the owner (may create an objective, O9).
    OwnerMessage,
    /// A correction of an objective by the owner (O14, R6).
    OwnerCorrection,
    /// A reference to an existing objective or task, handled without a reasoner call (O6).
    ExplicitReference,
    /// An internal receipt about an objective (O9, O13).
    InternalReceipt,
    /// An internal acknowledgement that a task waits on something outside (O12).
    WaitAck,
}

impl EventKind {
    /// The kind's wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::OwnerMessage => "owner_message",
            EventKind::OwnerCorrection => "owner_correction",
            EventKind::ExplicitReference => "explicit_reference",
            EventKind::InternalReceipt => "internal_receipt",
            EventKind::WaitAck => "wait_ack",
        }
    }
}

/// What an event says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EventBody {
    /// A message to the Room.
    OwnerMessage {
        /// The text.
        text: String,
    },
    /// A correction of an objective; `criteria`, when given, replace the frozen criteria.
    OwnerCorrection {
        /// The objective corrected.
        objective: ObjectiveId,
        /// The correction.
        text: String,
        /// New criteria, if the owner changes them.
        criteria: Option<Vec<Criterion>>,
    },
    /// A reference to an objective, or to one of its tasks.
    ExplicitReference {
        /// The objective referred to.
        objective: ObjectiveId,
        /// The task, if one is named.
        task: Option<TaskIdentity>,
    },
    /// A receipt of something internal about an objective.
    InternalReceipt {
        /// The objective it concerns, if any.
        objective: Option<ObjectiveId>,
        /// What it records.
        note: String,
    },
    /// A task waits on something outside the Room.
    WaitAck {
        /// The objective.
        objective: ObjectiveId,
        /// The waiting task.
        task: TaskIdentity,
        /// What it waits on.
        reason: String,
    },
}

impl EventBody {
    /// The objective the event names, if it names one.
    pub fn objective(&self) -> Option<ObjectiveId> {
        match self {
            EventBody::OwnerMessage { .. } => None,
            EventBody::OwnerCorrection { objective, .. }
            | EventBody::ExplicitReference { objective, .. }
            | EventBody::WaitAck { objective, .. } => Some(*objective),
            EventBody::InternalReceipt { objective, .. } => *objective,
        }
    }

    /// Whether [`RoomState::admits_event`] has anything to check for it: owner messages and
    /// explicit references are the engine's alone.
    pub const fn is_checked_against_the_room(&self) -> bool {
        !matches!(
            self,
            EventBody::OwnerMessage { .. } | EventBody::ExplicitReference { .. }
        )
    }

    /// The kind of event this body makes.
    pub const fn kind(&self) -> EventKind {
        match self {
            EventBody::OwnerMessage { .. } => EventKind::OwnerMessage,
            EventBody::OwnerCorrection { .. } => EventKind::OwnerCorrection,
            EventBody::ExplicitReference { .. } => EventKind::ExplicitReference,
            EventBody::InternalReceipt { .. } => EventKind::InternalReceipt,
            EventBody::WaitAck { .. } => EventKind::WaitAck,
        }
    }
}

/// Why the Room, as it is now, refuses what an event says. Decided here once: the engine logs
/// a refusal with its [`rule`](EventRefusal::rule) when it decides a stored event (the Room
/// may have moved since it was posted), and the service refuses the event before storing it
/// ([`RoomState::admits_event`]), so a refused post stores and changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventRefusal {
    /// The event names an objective this Room does not have.
    #[error("no objective {objective} in this room")]
    UnknownObjective {
        /// The kind of event.
        kind: EventKind,
        /// The objective named.
        objective: ObjectiveId,
    },
    /// An internal receipt that names no objective (O9: internal events never create one).
    #[error("internal events cannot create objectives: a receipt must name its objective")]
    NoObjective,
    /// A correction by someone other than the owner (O14).
    #[error("only the owner's corrections enter the correction history; {author} is not the owner")]
    NotOwner {
        /// Who posted it.
        author: PrincipalId,
    },
    /// A correction of a completed or canceled objective: it is not reopened (O14).
    #[error(
        "objective {objective} is {status}: a correction does not reopen it; post a new owner \
         message instead"
    )]
    Terminal {
        /// The objective.
        objective: ObjectiveId,
        /// Its terminal status.
        status: ObjectiveStatus,
    },
    /// A correction whose criteria cannot be frozen (O14).
    #[error("the corrected criteria are refused: {0}")]
    Criteria(CriteriaError),
    /// A wait acknowledgement for a task the objective's current plan does not have (O12).
    #[error("{task} is not a task of the current plan of objective {objective}")]
    UnknownTask {
        /// The objective.
        objective: ObjectiveId,
        /// The task named.
        task: TaskIdentity,
    },
    /// A wait acknowledgement by someone other than the task's assignee (O12, T3).
    #[error("only {assignee}, the assignee of {task}, may say that it waits; {author} is not")]
    NotAssignee {
        /// The task.
        task: TaskIdentity,
        /// Its assignee.
        assignee: PrincipalId,
        /// Who posted it.
        author: PrincipalId,
    },
    /// A wait acknowledgement for a task no call runs for (O12).
    #[error("{task} is not running: only a running task can wait on something outside")]
    NotRunning {
        /// The task.
        task: TaskIdentity,
    },
    /// A wait acknowledgement, or a receipt for a running objective, by an assignee that no
    /// longer holds the specialist role (T6: demoted or revoked, its calls are fenced and it
    /// speaks for no work of the Room any more).
    #[error(
        "{author} no longer holds the specialist role: a demoted or revoked assignee speaks \
         for no task"
    )]
    NotASpecialist {
        /// Who posted it.
        author: PrincipalId,
    },
    /// An internal receipt by someone assigned no task of the objective (O13, T3).
    #[error(
        "{author} is assigned no task of objective {objective}: only the assignees of its \
         tasks send its receipts"
    )]
    NotAnAssignee {
        /// The objective.
        objective: ObjectiveId,
        /// Who posted it.
        author: PrincipalId,
    },
}

/// What kind of refusal an [`EventRefusal`] is, for the edges that answer it (REST maps it
/// to a status once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// It names something the Room does not have.
    Unknown,
    /// Its author may not say it.
    NotAllowed,
    /// The Room is not in a state it applies to.
    WrongState,
    /// What it says cannot be taken as it is.
    Invalid,
}

impl EventRefusal {
    /// The rule that refuses it, for the decision log.
    pub fn rule(&self) -> Rule {
        match self {
            EventRefusal::UnknownObjective { kind, .. } => match kind {
                EventKind::OwnerCorrection => Rule::O14,
                EventKind::ExplicitReference => Rule::O6,
                EventKind::WaitAck => Rule::O12,
                EventKind::OwnerMessage | EventKind::InternalReceipt => Rule::O9,
            },
            EventRefusal::NoObjective => Rule::O9,
            EventRefusal::NotOwner { .. }
            | EventRefusal::Terminal { .. }
            | EventRefusal::Criteria(_) => Rule::O14,
            EventRefusal::UnknownTask { .. } | EventRefusal::NotRunning { .. } => Rule::O12,
            EventRefusal::NotAssignee { .. } | EventRefusal::NotAnAssignee { .. } => Rule::T3,
            EventRefusal::NotASpecialist { .. } => Rule::T6,
        }
    }

    /// What kind of refusal it is.
    pub fn kind(&self) -> RefusalKind {
        match self {
            EventRefusal::UnknownObjective { .. } | EventRefusal::UnknownTask { .. } => {
                RefusalKind::Unknown
            }
            EventRefusal::NotOwner { .. }
            | EventRefusal::NotAssignee { .. }
            | EventRefusal::NotAnAssignee { .. }
            | EventRefusal::NotASpecialist { .. } => RefusalKind::NotAllowed,
            EventRefusal::Terminal { .. } | EventRefusal::NotRunning { .. } => {
                RefusalKind::WrongState
            }
            EventRefusal::NoObjective | EventRefusal::Criteria(_) => RefusalKind::Invalid,
        }
    }
}

impl RoomState {
    /// Whether the Room, as it is now, takes what `author` says in `body`, by the rules of
    /// its kind. The author's membership (T1) and permission to post (T3) are checked before,
    /// and a blank text by [`EventBody::check`].
    ///
    /// - An owner correction (O14): of an objective of this Room, by its owner, that is not
    ///   completed or canceled (a correction never reopens one: the owner posts a new
    ///   message), with criteria, when it gives any, that can be frozen (at least one, keys
    ///   unique, texts not blank).
    /// - A wait acknowledgement (O12): for a task of the objective's current plan that a call
    ///   runs for, by the task's assignee, the one principal who knows its work waits on
    ///   something outside.
    /// - An internal receipt (O9, O13): naming an objective of this Room, by a principal
    ///   assigned a task of it in any of its plan versions. A receipt records that work done
    ///   for the objective was delivered or answered outside; only those who did the work can
    ///   say so, and on a running objective it costs a reasoner call, which no bystander may
    ///   start. Being an assignee of an earlier version (or of a completed objective) is
    ///   enough: a receipt may arrive after the plan moved on or the objective ended, and for
    ///   a terminal objective it is consumed without a call (O13).
    /// - Both signals, where they can cost anything, need the author to hold the specialist
    ///   role still (T6): a wait ack always (and its call must not be aborting or fenced), a
    ///   receipt for an objective that is not completed or canceled.
    /// - Owner messages and explicit references are decided by the engine alone (O9, O6).
    ///
    /// An objective that closed and left the live state is judged by its record, when the
    /// caller read it ([`RoomState::admits_event_with`]); here it is unknown.
    pub fn admits_event(&self, author: &PrincipalId, body: &EventBody) -> Result<(), EventRefusal> {
        self.admits_event_with(author, body, &NoArchive)
    }

    /// [`RoomState::admits_event`], with the records `archive` holds (an objective `body`
    /// names that is not live, read by [`Input::archive_needed`](crate::engine::Input)).
    pub fn admits_event_with(
        &self,
        author: &PrincipalId,
        body: &EventBody,
        archive: &dyn Archive,
    ) -> Result<(), EventRefusal> {
        let find = |kind: EventKind, objective: ObjectiveId| {
            self.objective(objective)
                .ok_or(EventRefusal::UnknownObjective { kind, objective })
        };
        // A closed objective that left the live state: its record decides (O13, O14).
        if let Some((objective, closed)) = body
            .objective()
            .filter(|id| self.objective(*id).is_none())
            .and_then(|id| archive.record(id).map(|r| (id, r)))
        {
            return match body {
                EventBody::OwnerCorrection { .. } if !self.members().has(author, Role::Owner) => {
                    Err(EventRefusal::NotOwner {
                        author: author.clone(),
                    })
                }
                EventBody::OwnerCorrection { .. } => Err(EventRefusal::Terminal {
                    objective,
                    status: closed.status(),
                }),
                EventBody::WaitAck { task, .. } => {
                    Err(EventRefusal::NotRunning { task: task.clone() })
                }
                EventBody::InternalReceipt { .. } if !closed.was_assigned(author) => {
                    Err(EventRefusal::NotAnAssignee {
                        objective,
                        author: author.clone(),
                    })
                }
                _ => Ok(()),
            };
        }
        match body {
            EventBody::OwnerMessage { .. } | EventBody::ExplicitReference { .. } => Ok(()),
            EventBody::OwnerCorrection {
                objective,
                criteria,
                ..
            } => {
                let o = find(EventKind::OwnerCorrection, *objective)?;
                if !self.members().has(author, Role::Owner) {
                    return Err(EventRefusal::NotOwner {
                        author: author.clone(),
                    });
                }
                if o.status().is_terminal() {
                    return Err(EventRefusal::Terminal {
                        objective: *objective,
                        status: o.status(),
                    });
                }
                match criteria {
                    Some(criteria) => {
                        Criterion::check_set(criteria).map_err(EventRefusal::Criteria)
                    }
                    None => Ok(()),
                }
            }
            EventBody::WaitAck {
                objective, task, ..
            } => {
                let o = find(EventKind::WaitAck, *objective)?;
                let t = o
                    .current_plan()
                    .and_then(|plan| plan.task(task))
                    .ok_or_else(|| EventRefusal::UnknownTask {
                        objective: *objective,
                        task: task.clone(),
                    })?;
                if t.assignee() != author {
                    return Err(EventRefusal::NotAssignee {
                        task: task.clone(),
                        assignee: t.assignee().clone(),
                        author: author.clone(),
                    });
                }
                if !self.members().has(author, Role::Specialist) {
                    return Err(EventRefusal::NotASpecialist {
                        author: author.clone(),
                    });
                }
                // A call asked to abort (D3) or fenced (T6) is ending: its task does not wait.
                let running = t.running_op().and_then(|op| self.operations().get(&op));
                if running.is_none_or(|op| op.fenced || op.state == OperationState::CancelRequested)
                {
                    return Err(EventRefusal::NotRunning { task: task.clone() });
                }
                Ok(())
            }
            EventBody::InternalReceipt { objective, .. } => {
                let objective = objective.ok_or(EventRefusal::NoObjective)?;
                let o = find(EventKind::InternalReceipt, objective)?;
                let assigned = o
                    .plans()
                    .iter()
                    .flat_map(|plan| plan.tasks())
                    .any(|t| t.assignee() == author);
                if !assigned {
                    return Err(EventRefusal::NotAnAssignee {
                        objective,
                        author: author.clone(),
                    });
                }
                // On a running objective a receipt starts a paid reasoner call: only a current
                // specialist may start it (T6); for a terminal one it costs nothing (O13).
                if !o.status().is_terminal() && !self.members().has(author, Role::Specialist) {
                    return Err(EventRefusal::NotASpecialist {
                        author: author.clone(),
                    });
                }
                Ok(())
            }
        }
    }
}
