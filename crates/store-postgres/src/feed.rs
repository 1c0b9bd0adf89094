//! The read side of a Room's history and outbox on PostgreSQL (migration 0006): which
//! revision decided an operator input, the history rows after a revision (the decision log),
//! and the notifications delivered after a delivery position (the notification feed). Each is
//! one statement of [`sql`]; [`PgRooms`]'s `RoomStore` implementation calls them.

use agentroom_domain::ids::{InputId, NotificationId, RoomId, Timestamp};
use agentroom_ports::{Delivered, HistoryEntry, OutboxPosition, Revision, StoreError};

use crate::rooms::{PgRooms, failed, parse_json};
use crate::sql;

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl PgRooms {
    pub(crate) async fn decided_input(
        &self,
        room: &RoomId,
        input: InputId,
    ) -> Result<Option<Revision>, StoreError> {
        let revision: Option<i64> = sqlx::query_scalar(sql::SELECT_INPUT_DECIDED)
            .bind(room.as_str())
            .bind(input.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading a decided input"))?;
        Ok(revision.map(Revision))
    }

    pub(crate) async fn history_after(
        &self,
        room: &RoomId,
        after: Revision,
        count: usize,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        type Row = (i64, String, Option<String>, Option<String>, String, i64);
        let rows: Vec<Row> = sqlx::query_as(sql::SELECT_HISTORY)
            .bind(room.as_str())
            .bind(after.0)
            .bind(limit(count))
            .fetch_all(&self.pool)
            .await
            .map_err(failed("reading a Room's history"))?;
        rows.into_iter()
            .map(|(revision, input, event, input_id, log, at)| {
                let corrupt = |what: &str, text: &str| {
                    StoreError::inconsistent(format!("{what} {text} of history row {revision}"))
                };
                Ok(HistoryEntry {
                    revision: Revision(revision),
                    input,
                    event: event
                        .map(|e| e.parse().map_err(|_| corrupt("event id", &e)))
                        .transpose()?,
                    input_id: input_id
                        .map(|i| i.parse().map_err(|_| corrupt("input id", &i)))
                        .transpose()?,
                    log: parse_json("a decision log", &log)?,
                    at: Timestamp::from_millis(at),
                })
            })
            .collect()
    }

    pub(crate) async fn delivered_after(
        &self,
        room: &RoomId,
        after: i64,
        count: usize,
    ) -> Result<Vec<Delivered>, StoreError> {
        let rows: Vec<(i64, String)> = sqlx::query_as(sql::SELECT_DELIVERED)
            .bind(room.as_str())
            .bind(after)
            .bind(limit(count))
            .fetch_all(&self.pool)
            .await
            .map_err(failed("reading delivered notifications"))?;
        rows.into_iter()
            .map(|(position, body)| {
                Ok(Delivered {
                    position,
                    notification: parse_json("an outbox notification", &body)?,
                })
            })
            .collect()
    }

    pub(crate) async fn position_in_outbox(
        &self,
        room: &RoomId,
        id: NotificationId,
    ) -> Result<Option<OutboxPosition>, StoreError> {
        let row: Option<Option<i64>> = sqlx::query_scalar(sql::SELECT_OUTBOX_POSITION)
            .bind(id.to_string())
            .bind(room.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading a notification's position"))?;
        Ok(row.map(|p| p.map_or(OutboxPosition::Undelivered, OutboxPosition::Delivered)))
    }
}
