//! Notifications leave through the outbox (T5): each was stored with the decision that made
//! it; a pass delivers the undelivered ones whose audience is still authorized (T3) and marks
//! them delivered. [`CollectingNotifier`] is an in-process receiver that deduplicates on the
//! notification id.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use agentroom_ports::domain::engine::Notification;
use agentroom_ports::domain::ids::{NotificationId, RoomId};
use agentroom_ports::{Notifier, NotifyError, OutboxItem};
use async_trait::async_trait;

use crate::{CoordinatorError, Shared};

pub(crate) async fn deliver(shared: &Arc<Shared>) -> Result<usize, CoordinatorError> {
    let items: Vec<OutboxItem> = shared.store.undelivered(shared.config.outbox_batch).await?;
    let mut delivered = 0;
    for item in items {
        let id = item.notification.id;
        let state = shared.store.load(&item.room).await?.map(|r| r.state);
        let allowed = state
            .as_ref()
            .is_some_and(|s| s.may_be_notified(&item.notification.audience));
        if !allowed {
            tracing::warn!(%id, "T3: the audience is no longer a member; not delivered");
            shared.store.mark_delivered(id).await?;
            continue;
        }
        match shared
            .notifier
            .deliver(&item.room, &item.notification)
            .await
        {
            Ok(()) => {
                shared.store.mark_delivered(id).await?;
                delivered += 1;
            }
            Err(err) => {
                tracing::warn!(%id, %err, "delivery failed; the outbox keeps it");
                shared.store.mark_attempt(id).await?;
            }
        }
    }
    Ok(delivered)
}

/// Keeps every notification it is handed once, in order (deduplicated on the id, T5).
#[derive(Debug, Default)]
pub struct CollectingNotifier {
    inner: Mutex<Received>,
}

#[derive(Debug, Default)]
struct Received {
    seen: BTreeSet<NotificationId>,
    kept: Vec<(RoomId, Notification)>,
}

impl CollectingNotifier {
    /// An empty receiver.
    pub fn new() -> Self {
        Self::default()
    }

    /// What it received, in order.
    pub fn received(&self) -> Vec<(RoomId, Notification)> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .kept
            .clone()
    }
}

#[async_trait]
impl Notifier for CollectingNotifier {
    async fn deliver(&self, room: &RoomId, notification: &Notification) -> Result<(), NotifyError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.seen.insert(notification.id) {
            inner.kept.push((room.clone(), notification.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use agentroom_ports::domain::ids::PrincipalId;
    use agentroom_ports::domain::money::UsdMicros;
    use agentroom_ports::domain::policy::{AccessPolicy, RoomPolicy};
    use agentroom_ports::domain::state::{Quotes, RoomSetup};

    use agentroom_ports::domain::engine::Audience;
    use agentroom_ports::domain::state::RoomState;

    use super::*;

    #[test]
    fn t3_a_notification_to_a_principal_needs_a_current_membership() {
        let state = RoomState::new(RoomSetup {
            room: RoomId::parse("local").unwrap(),
            owner: PrincipalId::parse("olive").unwrap(),
            policy: RoomPolicy::default(),
            access: AccessPolicy::default(),
            quotes: Quotes {
                reasoner: UsdMicros::new(1),
                specialist: UsdMicros::new(1),
                reviewer: UsdMicros::new(1),
            },
            limit: UsdMicros::new(1_000),
        })
        .unwrap();
        let to = |p: &str| Audience::Principal(PrincipalId::parse(p).unwrap());
        // audience → delivered?, written out
        let expected = [
            (to("olive"), true),
            (to("mallory"), false),
            (Audience::Owners, true),
            (Audience::Operators, true),
            (Audience::Reviewers, true),
        ];
        for (audience, delivered) in expected {
            assert_eq!(state.may_be_notified(&audience), delivered, "{audience:?}");
        }
    }
}
