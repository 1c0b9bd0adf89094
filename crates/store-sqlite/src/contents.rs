//! [`ArtifactStore`] on SQLite for [`SqliteRooms`]: the `room_contents` table (migration
//! 0007), one statement per method. Content is inserted once under the digest computed here
//! and never updated; a read checks the bytes still hash to their address.

use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::ids::{RoomId, Timestamp};
use agentroom_ports::StoreError;
use agentroom_ports::artifacts::{ArtifactStore, Put, StoredContent, verified};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use crate::rooms::SqliteRooms;

#[async_trait]
impl ArtifactStore for SqliteRooms {
    #[tracing::instrument(skip_all, fields(room = %room, bytes = bytes.len()))]
    async fn put_content(
        &self,
        room: &RoomId,
        media_type: &str,
        bytes: &[u8],
        at: Timestamp,
    ) -> Result<(ContentDigest, Put), StoreError> {
        let digest = ContentDigest::of(bytes);
        let size =
            i64::try_from(bytes.len()).map_err(|e| StoreError::database("put_content: size", e))?;
        let connection = self.connections.writer();
        let inserted = connection
            .prepare_cached(
                "INSERT INTO room_contents (room_id, digest, media_type, bytes, size, created_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (room_id, digest) DO NOTHING",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    room.as_str(),
                    digest.as_str(),
                    media_type,
                    bytes,
                    size,
                    at.as_millis()
                ])
            })
            .map_err(|e| StoreError::database("put_content", e))?;
        let put = if inserted == 1 {
            Put::Stored
        } else {
            Put::Present
        };
        Ok((digest, put))
    }

    #[tracing::instrument(skip_all, fields(room = %room, digest = %digest))]
    async fn content(
        &self,
        room: &RoomId,
        digest: &ContentDigest,
    ) -> Result<Option<StoredContent>, StoreError> {
        let connection = self.connections.reader();
        let row = connection
            .prepare_cached(
                "SELECT digest, media_type, bytes FROM room_contents \
                 WHERE room_id = ?1 AND digest = ?2",
            )
            .and_then(|mut statement| {
                statement
                    .query_row(params![room.as_str(), digest.as_str()], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, Vec<u8>>(2)?,
                        ))
                    })
                    .optional()
            })
            .map_err(|e| StoreError::database("content", e))?;
        let Some((stored, media_type, bytes)) = row else {
            return Ok(None);
        };
        let stored: ContentDigest = stored
            .parse()
            .map_err(|e| StoreError::corrupt(format!("content {digest}: its digest"), e))?;
        verified(
            digest,
            StoredContent {
                digest: stored,
                media_type,
                bytes,
            },
        )
        .map(Some)
    }
}
