//! What became of a call, as the one value the runner reports and the engine decides (D2, B3):
//! it returned, it was never sent, it is uncertain, or a reconciler (or an operator) confirmed
//! what an uncertain call did. Each becomes exactly one [`Input`]; each applies only while the
//! Room's operation is in the state that outcome can follow (so a second delivery of the same
//! outcome, after a crash or on every recovery pass, finds it decided and changes nothing);
//! and each but an uncertain call settles the operation.

use serde::{Deserialize, Serialize};

use super::{CallResult, Charge, Decision, Input, Reconciliation};
use crate::ids::OperationId;
use crate::money::UsdMicros;
use crate::state::OperationState;

/// What became of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "call")]
pub enum CallEvent {
    /// The provider returned a result with its usage (possibly after a cancel: late, not
    /// lost, D4).
    Returned {
        /// What it cost.
        charge: Charge,
        /// What it returned.
        result: CallResult,
    },
    /// Nothing reached the provider (bounded retries spent, refused, or refused at the sink
    /// by T3): known never to have run, settled at zero.
    NotSent,
    /// It may have run and has no receipt: the reservation is held and it is never replayed
    /// (D2).
    Uncertain,
    /// A reconciler, or an operator's resolution, confirmed what an uncertain call did (D2).
    Reconciled(Reconciliation),
}

impl CallEvent {
    /// The input the engine decides for operation `op`.
    pub fn input(self, op: OperationId) -> Input {
        match self {
            CallEvent::Returned { charge, result } => Input::CallReturned { op, charge, result },
            CallEvent::NotSent => Input::CallSettled {
                op,
                charge: Charge::Actual(UsdMicros::ZERO),
            },
            CallEvent::Uncertain => Input::CallUncertain { op },
            CallEvent::Reconciled(outcome) => Input::Reconciled { op, outcome },
        }
    }

    /// The kind of input it becomes, as history records it (and ids derive from it).
    pub const fn kind(&self) -> &'static str {
        match self {
            CallEvent::Returned { .. } => "call_returned",
            CallEvent::NotSent => "call_settled",
            CallEvent::Uncertain => "call_uncertain",
            CallEvent::Reconciled(_) => "reconciled",
        }
    }

    /// Whether it still applies to an operation the Room holds in `state`: a call's own
    /// outcome to a call still running (or asked to stop, D3), a confirmation to an uncertain
    /// one. Anything else was decided before.
    pub const fn fits(&self, state: OperationState) -> bool {
        match self {
            CallEvent::Returned { .. } | CallEvent::NotSent | CallEvent::Uncertain => matches!(
                state,
                OperationState::InFlight | OperationState::CancelRequested
            ),
            CallEvent::Reconciled(_) => matches!(state, OperationState::Uncertain),
        }
    }

    /// Whether deciding it settles the operation (its reservation charged or released, B3),
    /// so the operation's durable record may be marked applied. An uncertain call keeps its
    /// reservation until it is confirmed (D2).
    pub const fn settles(&self) -> bool {
        !matches!(self, CallEvent::Uncertain)
    }
}

impl Decision {
    /// Whether this decision leaves operation `op` settled in the Room (no longer holding its
    /// reservation): only then may its commit mark the operation applied. The engine may
    /// refuse an outcome (e.g. a charge it cannot add), and then the operation waits.
    pub fn settles(&self, op: OperationId) -> bool {
        self.state
            .operation(op)
            .is_none_or(|operation| !operation.state().is_open())
    }
}
