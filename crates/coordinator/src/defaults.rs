//! The ports a [`CoordinatorBuilder`](crate::CoordinatorBuilder) starts with, for the commands
//! that only read or record (create a Room, issue a token, post an event for a running host):
//! no agents, nobody to confirm an uncertain call, notifications traced and dropped.

use agentroom_ports::domain::engine::{CallRequest, Notification, Reconciliation};
use agentroom_ports::domain::ids::RoomId;
use agentroom_ports::{Notifier, NotifyError, OperationRecord, ReconcileError, Reconciler};
use agentroom_workflows::{Abort, CallOutcome, Provider};
use async_trait::async_trait;

/// No agents: every call is refused before it is sent (nothing ran, nothing is charged).
pub(crate) struct NoAgents;

#[async_trait]
impl Provider for NoAgents {
    async fn call(
        &self,
        request: &CallRequest,
        _context: &agentroom_ports::CallContext,
        _abort: Abort,
    ) -> CallOutcome {
        CallOutcome::Refused {
            reason: format!(
                "no agents are configured in this process for the {} call {}",
                request.role.as_str(),
                request.op
            ),
        }
    }
}

/// Nobody can confirm an uncertain call: it stays uncertain for an operator (D2).
pub(crate) struct NobodyKnows;

#[async_trait]
impl Reconciler for NobodyKnows {
    async fn reconcile(
        &self,
        _operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError> {
        Ok(None)
    }
}

/// Notifications are traced; nothing receives them.
pub(crate) struct TracedNotifier;

#[async_trait]
impl Notifier for TracedNotifier {
    async fn deliver(&self, room: &RoomId, notification: &Notification) -> Result<(), NotifyError> {
        tracing::info!(%room, id = %notification.id, "notification (no receiver configured)");
        Ok(())
    }
}
