//! Ids derived from the persisted input (DESIGN.md "The engine"): every decision's `Env.ids`
//! is a `DerivedIds` whose namespace is derived from what was persisted — the event id of an
//! accepted event, the operation id and the kind of a call outcome, an explicit input id for
//! control and operator inputs — so deciding the same input again (after a conflict or a
//! crash) yields the same ids, and the store's idempotent inserts absorb the retry.

use agentroom_ports::domain::engine::{Input, MemberChange, MemoryChange};
use agentroom_ports::domain::ids::{EventId, OperationId};
use agentroom_ports::domain::redaction::RedactionTarget;
use uuid::Uuid;

/// The namespace of all coordinator-derived ids.
const NAMESPACE: Uuid = Uuid::from_u128(0x6167_656e_7472_6f6f_6d2d_636f_6f72_6400);

/// The persisted id of a control or operator input (a request id the caller stored or
/// received with the request); the same id decides to the same ids, and a Room's store
/// commits a decision of it once.
pub use agentroom_ports::domain::ids::InputId;

/// Where a decision's ids come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdSeed {
    /// An accepted event: its id.
    Event(EventId),
    /// A call outcome: the operation and the kind of outcome.
    Outcome(OperationId, &'static str),
    /// A control or operator input: its persisted id.
    Input(InputId),
}

impl IdSeed {
    /// The operator input this seed is, if any: its decision is committed once per Room.
    pub(crate) fn input(self) -> Option<InputId> {
        match self {
            IdSeed::Input(id) => Some(id),
            IdSeed::Event(_) | IdSeed::Outcome(..) => None,
        }
    }
}

impl IdSeed {
    /// The namespace the decision's `DerivedIds` start from.
    pub(crate) fn namespace(self) -> Uuid {
        match self {
            IdSeed::Event(event) => Uuid::new_v5(&NAMESPACE, event.as_uuid().as_bytes()),
            IdSeed::Outcome(op, kind) => Uuid::new_v5(op.as_uuid(), kind.as_bytes()),
            IdSeed::Input(id) => Uuid::new_v5(&NAMESPACE, id.as_uuid().as_bytes()),
        }
    }
}

/// The kind of an input, as history records it.
pub(crate) fn kind_of(input: &Input) -> &'static str {
    match input {
        Input::EventAccepted(_) => "event_accepted",
        Input::CallReturned { .. } => "call_returned",
        Input::CallSettled { .. } => "call_settled",
        Input::CallUncertain { .. } => "call_uncertain",
        Input::CallWaiting { .. } => "call_waiting",
        Input::CallFailed { .. } => "call_failed",
        Input::RetryMessage { .. } => "retry_message",
        Input::UpdateQuotes { .. } => "update_quotes",
        Input::Reconciled { .. } => "reconciled",
        Input::Control { .. } => "control",
        Input::DecideLateResult { .. } => "decide_late_result",
        Input::RaiseLimit { .. } => "raise_limit",
        Input::AcknowledgeOverrun { .. } => "acknowledge_overrun",
        Input::RecordReview { .. } => "record_review",
        Input::UpdateTask { .. } => "update_task",
        Input::ChangeMembership { .. } => "change_membership",
        Input::Memory { change, .. } => match change {
            MemoryChange::Add { .. } => "add_memory",
            MemoryChange::Correct { .. } => "correct_memory",
            MemoryChange::Retract { .. } => "retract_memory",
        },
        Input::AttachPool { .. } => "attach_pool",
        Input::PoolChanged => "pool_changed",
        Input::ReplaceAccess { .. } => "replace_access",
        Input::Redact { target, .. } => match target {
            RedactionTarget::Artifact { .. } => "redact_artifact",
            RedactionTarget::Memory { .. } => "redact_memory",
        },
        Input::ChangeMember { change, .. } => match change {
            MemberChange::Add { .. } => "add_member",
            MemberChange::SetRoles { .. } => "change_member_roles",
            MemberChange::Revoke => "revoke_member",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_persisted_input_derives_the_same_namespace() {
        let op: OperationId = "00000000-0000-0000-0000-000000000007".parse().unwrap();
        assert_eq!(
            IdSeed::Outcome(op, "call_returned").namespace(),
            IdSeed::Outcome(op, "call_returned").namespace()
        );
        assert_ne!(
            IdSeed::Outcome(op, "call_returned").namespace(),
            IdSeed::Outcome(op, "call_settled").namespace()
        );
        assert_eq!(
            IdSeed::Input(InputId::named("a")).namespace(),
            IdSeed::Input(InputId::named("a")).namespace()
        );
    }
}
