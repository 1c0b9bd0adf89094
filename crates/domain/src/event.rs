//! Events: persisted before they are decided, authored by the authenticated principal (T1).

use serde::{Deserialize, Serialize};

use crate::ids::{EventId, ObjectiveId, PrincipalId, RoomId, TaskIdentity};
use crate::objective::Criterion;

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
    /// An owner message or correction whose text is empty or only whitespace: it asks the
    /// reasoner nothing, so it would pay for a call that can only answer "what?".
    #[error("the {0} text is blank: say what you want")]
    BlankText(EventKind),
}

impl EventBody {
    /// Checks what an event says before it is stored (the service) and again before it is
    /// decided (the engine): a blank owner message or correction is refused.
    pub fn check(&self) -> Result<(), EventError> {
        match self {
            EventBody::OwnerMessage { text } if text.trim().is_empty() => {
                Err(EventError::BlankText(EventKind::OwnerMessage))
            }
            EventBody::OwnerCorrection { text, .. } if text.trim().is_empty() => {
                Err(EventError::BlankText(EventKind::OwnerCorrection))
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
