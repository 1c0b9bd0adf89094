//! [`ArtifactStore`] on PostgreSQL for [`PgRooms`]: artifact and source content in the
//! `room_contents` table (migration 0007), once per Room under the SHA-256 of its bytes. One
//! statement per method; every read is checked against its address before it is returned.

use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::ids::{RoomId, Timestamp};
use agentroom_ports::StoreError;
use agentroom_ports::artifacts::{ArtifactStore, Put, StoredContent, verified};
use async_trait::async_trait;

use crate::rooms::{PgRooms, failed};
use crate::sql;

#[async_trait]
impl ArtifactStore for PgRooms {
    #[tracing::instrument(level = "debug", skip(self, bytes), fields(size = bytes.len()))]
    async fn put_content(
        &self,
        room: &RoomId,
        media_type: &str,
        bytes: &[u8],
        at: Timestamp,
    ) -> Result<(ContentDigest, Put), StoreError> {
        let digest = ContentDigest::of(bytes);
        let inserted = sqlx::query(sql::INSERT_CONTENT)
            .bind(room.as_str())
            .bind(digest.as_str())
            .bind(media_type)
            .bind(bytes)
            .bind(at.as_millis())
            .execute(&self.pool)
            .await
            .map_err(failed("storing content"))?;
        // The same bytes have the same address: a row already there is this content.
        let put = if inserted.rows_affected() == 0 {
            Put::Present
        } else {
            Put::Stored
        };
        Ok((digest, put))
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn content(
        &self,
        room: &RoomId,
        digest: &ContentDigest,
    ) -> Result<Option<StoredContent>, StoreError> {
        let row: Option<(String, Vec<u8>)> = sqlx::query_as(sql::SELECT_CONTENT)
            .bind(room.as_str())
            .bind(digest.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading content"))?;
        row.map(|(media_type, bytes)| {
            // The row was found under `digest`; whether its bytes still hash to it is what
            // `verified` checks.
            verified(
                digest,
                StoredContent {
                    digest: digest.clone(),
                    media_type,
                    bytes,
                },
            )
        })
        .transpose()
    }
}
