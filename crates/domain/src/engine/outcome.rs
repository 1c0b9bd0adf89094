//! What became of a call, as the one value the runner reports and the engine decides (D2, B3):
//! it returned, it was never sent, it is uncertain, or a reconciler (or an operator) confirmed
//! what an uncertain call did. Each becomes exactly one [`Input`]; each applies only while the
//! Room's operation is in the state that outcome can follow (so a second delivery of the same
//! outcome, after a crash or on every recovery pass, finds it decided and changes nothing);
//! and each but an uncertain call settles the operation.

use serde::{Deserialize, Serialize};

use super::{CallResult, Charge, Decision, Input, Reconciliation};
use crate::ids::OperationId;
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
    /// Nothing reached the provider yet (connection refused, rate limited): the call is
    /// retried with backoff under the same id, its reservation held; the Room shows it waits.
    Waiting {
        /// What the provider (or the lack of one) said.
        cause: String,
    },
    /// Nothing ran: the provider stayed unreachable for the whole window, refused the request
    /// before running it, or the sink refused it (T3). Known never to have run, settled at
    /// zero.
    NotSent(CallFailure),
    /// It may have run and has no receipt: the reservation is held and it is never replayed
    /// (D2).
    Uncertain {
        /// Why no receipt exists, when known (a status, a broken connection, an expired
        /// lease).
        cause: Option<String>,
    },
    /// A reconciler, or an operator's resolution, confirmed what an uncertain call did (D2).
    Reconciled(Reconciliation),
}

impl CallEvent {
    /// The input the engine decides for operation `op`.
    pub fn input(self, op: OperationId) -> Input {
        match self {
            CallEvent::Returned { charge, result } => Input::CallReturned { op, charge, result },
            CallEvent::Waiting { cause } => Input::CallWaiting { op, cause },
            CallEvent::NotSent(failure) => Input::CallFailed { op, failure },
            CallEvent::Uncertain { cause } => Input::CallUncertain { op, cause },
            CallEvent::Reconciled(outcome) => Input::Reconciled { op, outcome },
        }
    }

    /// The kind of input it becomes, as history records it (and ids derive from it).
    pub const fn kind(&self) -> &'static str {
        match self {
            CallEvent::Returned { .. } => "call_returned",
            CallEvent::Waiting { .. } => "call_waiting",
            CallEvent::NotSent(_) => "call_failed",
            CallEvent::Uncertain { .. } => "call_uncertain",
            CallEvent::Reconciled(_) => "reconciled",
        }
    }

    /// Whether it still applies to an operation the Room holds in `state`: a call's own
    /// outcome to a call still running (or asked to stop, D3), a confirmation to an uncertain
    /// one. Anything else was decided before.
    pub const fn fits(&self, state: OperationState) -> bool {
        match self {
            CallEvent::Waiting { .. } => matches!(state, OperationState::InFlight),
            CallEvent::Returned { .. } | CallEvent::NotSent(_) | CallEvent::Uncertain { .. } => {
                matches!(
                    state,
                    OperationState::InFlight | OperationState::CancelRequested
                )
            }
            CallEvent::Reconciled(_) => matches!(state, OperationState::Uncertain),
        }
    }

    /// Whether deciding it settles the operation (its reservation charged or released, B3),
    /// so the operation's durable record may be marked applied. An uncertain call keeps its
    /// reservation until it is confirmed (D2).
    pub const fn settles(&self) -> bool {
        !matches!(
            self,
            CallEvent::Uncertain { .. } | CallEvent::Waiting { .. }
        )
    }
}

/// Why a call ended without running, as people read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallFailure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// What the provider, the adapter or the sink said (a status, a message, a rule).
    pub cause: String,
}

impl CallFailure {
    /// A failure of `kind` for `cause`.
    pub fn new(kind: FailureKind, cause: impl Into<String>) -> Self {
        Self {
            kind,
            cause: cause.into(),
        }
    }
}

/// The kinds of calls that never ran. None consumes an interpretation (O11) or counts as a
/// replan (O8): the provider failed, not the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Nothing reached the provider for the whole waiting window: the objective (or the
    /// pending message) stops for attention until someone resumes it.
    Unreachable,
    /// The provider or its adapter refused the request before running it (a 4xx, a price
    /// older than the Room's quote, a request above its bounds, no adapter): sending it again
    /// cannot help; it stops for attention naming the fix.
    Refused,
    /// The sink refused it: its principal no longer holds the role it was called in (T3).
    /// The work is open again as after any failed call.
    Unauthorized,
}

impl FailureKind {
    /// Its wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            FailureKind::Unreachable => "unreachable",
            FailureKind::Refused => "refused",
            FailureKind::Unauthorized => "unauthorized",
        }
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
