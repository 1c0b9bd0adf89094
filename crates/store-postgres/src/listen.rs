//! The Room change feed on PostgreSQL (issue 21): LISTEN on `agentroom_rooms`, which
//! migration 0010's triggers notify with a Room's id when an event is persisted for it or it is
//! created. One dedicated connection per feed, outside the pool.

use std::collections::BTreeSet;
use std::time::Duration;

use agentroom_domain::ids::RoomId;
use agentroom_ports::{RoomFeed, RoomSignal, StoreError};
use async_trait::async_trait;
use sqlx::postgres::{PgListener, PgNotification, PgPool};

use crate::sql::ROOM_CHANNEL as CHANNEL;

/// How long a feed whose connection fails waits before it says so again: a database that is
/// down must not make the host spin.
const RETRY: Duration = Duration::from_secs(1);

/// A LISTEN connection on [`CHANNEL`].
pub(crate) struct PgFeed {
    listener: PgListener,
}

impl PgFeed {
    /// Listens on a connection of its own, made with `pool`'s options (the same database).
    pub(crate) async fn listen(pool: &PgPool) -> Result<Self, StoreError> {
        let mut listener = PgListener::connect_with(pool)
            .await
            .map_err(|e| StoreError::database("connecting the room change feed", e))?;
        listener
            .listen(CHANNEL)
            .await
            .map_err(|e| StoreError::database("listening for room changes", e))?;
        Ok(Self { listener })
    }
}

fn room(notification: &PgNotification, rooms: &mut BTreeSet<RoomId>) {
    match RoomId::parse(notification.payload()) {
        Ok(room) => {
            rooms.insert(room);
        }
        // Not a Room id (someone else notifying the channel): ignored.
        Err(error) => tracing::debug!(%error, "a notice that names no room"),
    }
}

#[async_trait]
impl RoomFeed for PgFeed {
    async fn next(&mut self) -> RoomSignal {
        match self.listener.try_recv().await {
            Ok(Some(first)) => {
                let mut rooms = BTreeSet::new();
                room(&first, &mut rooms);
                while let Some(more) = self.listener.next_buffered() {
                    room(&more, &mut rooms);
                }
                RoomSignal::Changed(rooms.into_iter().collect())
            }
            // The connection was lost; the listener reconnects (and listens again) on the next
            // call. What was notified meanwhile is missed.
            Ok(None) => RoomSignal::Missed,
            Err(error) => {
                tracing::warn!(%error, "the room change feed failed; passing over every room");
                tokio::time::sleep(RETRY).await;
                RoomSignal::Missed
            }
        }
    }
}
