//! What executes one call: the [`Provider`] port of the runner and the [`CallOutcome`] it
//! reports. Real adapters (HTTP models, specialists) come with the room loop.

use std::time::Duration;

use agentroom_ports::domain::engine::CallRequest;
use agentroom_ports::{CallContext, Receipt};
use async_trait::async_trait;

use crate::abort::Abort;

/// How one call ended, as the provider knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// It returned a result with its charge.
    Returned(Receipt),
    /// Nothing reached the provider (connection refused, rate limited before sending): it may
    /// be retried, after `retry_after` if the provider said so.
    NotSent {
        /// How long the provider asked to wait.
        retry_after: Option<Duration>,
        /// Why.
        reason: String,
    },
    /// The provider refused the request without running it (rejected credentials, a request
    /// it cannot accept, no adapter for the call): nothing ran and nothing is charged, and
    /// sending it again cannot help. It is not retried; it ends like an unsent call whose
    /// retries are used up.
    Refused {
        /// Why, for the operator: what was refused and what to fix.
        reason: String,
    },
    /// It was sent and its outcome is unknown (timeout after sending, connection reset): it is
    /// never retried blindly (D2).
    Uncertain {
        /// Why.
        reason: String,
    },
    /// It stopped cooperatively because its [`Abort`] fired.
    Aborted,
}

/// Executes one call. It must watch `abort` and return [`CallOutcome::Aborted`] soon after it
/// fires; a provider that ignores it is dropped after the runner's grace period.
#[async_trait]
pub trait Provider: Send + Sync {
    /// Executes `request`, which sees `context` of the Room (C1).
    async fn call(&self, request: &CallRequest, context: &CallContext, abort: Abort)
    -> CallOutcome;
}
