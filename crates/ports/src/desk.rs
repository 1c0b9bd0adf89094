//! The agent-host desk: the specialist calls that wait in this process for a result an agent
//! host submits over an edge (REST today), and the submission of that result. The service
//! offers it to every edge ([`HostedDesk`]); the agents crate implements it (its hosted
//! specialists record each submission durably before the waiting call uses it, D2).

use agentroom_domain::engine::{Charge, SpecialistResult};
use agentroom_domain::ids::{ContributionId, DerivedIds, IdSource, OperationId, PrincipalId};

use crate::agents::SpecialistCall;
use crate::error::BoxError;

/// The id of the contribution operation `op` returns: derived from the operation, so the same
/// call always names the same contribution, whichever adapter or edge produced it.
pub fn contribution_id(op: OperationId) -> ContributionId {
    ContributionId::from_uuid(DerivedIds::new(*op.as_uuid()).next_uuid())
}

/// A result an agent host submitted for one assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// What it cost: the actual usage, or [`Charge::NoUsage`] (the whole reservation, B3).
    pub charge: Charge,
    /// The contribution or the failure.
    pub result: SpecialistResult,
}

/// Why a submission was refused; nothing was recorded.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The call is for another specialist (T2).
    #[error("operation {op} is assigned to another specialist, not to `{principal}`")]
    NotYours {
        /// The operation.
        op: OperationId,
        /// Who submitted.
        principal: PrincipalId,
    },
    /// A result for it is recorded already.
    #[error("operation {op} already has a submitted result; an operation takes one")]
    AlreadySubmitted {
        /// The operation.
        op: OperationId,
    },
    /// No call of this host is waiting for it (it ended, was aborted, or runs elsewhere).
    #[error("operation {op} is not waiting for a result on this host")]
    NotWaiting {
        /// The operation.
        op: OperationId,
    },
    /// The submission could not be made durable.
    #[error("the submission could not be recorded: {0}")]
    Unrecorded(#[source] BoxError),
}

/// The calls of hosted specialists waiting in this process, and their results.
pub trait HostedDesk: Send + Sync {
    /// Whether `principal`'s work is executed by an agent host here.
    fn serves(&self, principal: &PrincipalId) -> bool;

    /// The calls waiting for `principal`'s result: each with what the domain decided it may
    /// see.
    fn assignments(&self, principal: &PrincipalId) -> Vec<SpecialistCall>;

    /// Records `principal`'s `submission` for `op` durably, then hands it to the waiting call;
    /// refused, with nothing recorded, when the call is another's, has a result already or is
    /// not waiting here.
    fn submit(
        &self,
        principal: &PrincipalId,
        op: OperationId,
        submission: Submission,
    ) -> Result<(), SubmitError>;
}
