//! Notifications leave through an outbox: stored with the decision that made them, delivered
//! at least once, deduplicated by receivers on their stable id (T5).

use agentroom_domain::engine::Notification;
use agentroom_domain::ids::{NotificationId, RoomId};
use async_trait::async_trait;

use crate::rooms::StoreError;

/// An undelivered notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxItem {
    /// The Room.
    pub room: RoomId,
    /// The notification (its id is stable).
    pub notification: Notification,
    /// Delivery attempts so far.
    pub attempts: u32,
}

/// The stored outbox.
#[async_trait]
pub trait Outbox: Send + Sync {
    /// Up to `limit` undelivered notifications, oldest first.
    async fn undelivered(&self, limit: usize) -> Result<Vec<OutboxItem>, StoreError>;

    /// Marks one delivered (idempotent).
    async fn mark_delivered(&self, id: NotificationId) -> Result<(), StoreError>;

    /// Counts a failed attempt.
    async fn mark_attempt(&self, id: NotificationId) -> Result<(), StoreError>;
}

/// A failed delivery; the outbox retries it.
#[derive(Debug, thiserror::Error)]
#[error("delivery failed: {0}")]
pub struct NotifyError(pub String);

/// Where notifications go (the event stream, later webhooks). Receivers deduplicate on the
/// notification id.
#[async_trait]
pub trait Notifier: Send + Sync {
    /// Delivers one notification.
    async fn deliver(&self, room: &RoomId, notification: &Notification) -> Result<(), NotifyError>;
}
