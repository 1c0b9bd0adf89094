//! The artifact conformance suite on SQLite, and what a read does with content changed
//! behind the store's back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agentroom_ports::ArtifactStore;
use agentroom_ports::domain::ids::{RoomId, Timestamp};
use agentroom_store_sqlite::{Durability, SqliteRooms, migrate};

async fn fresh() -> Arc<SqliteRooms> {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("agentroom.db");
    migrate::up(&path).unwrap();
    Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash).unwrap())
}

agentroom_ports::artifact_conformance!(fresh);

/// Content is immutable: bytes changed behind the store's back no longer hash to their
/// address, and a read says so rather than hand them out.
#[tokio::test]
async fn content_changed_behind_the_stores_back_is_an_error_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    migrate::up(&path).unwrap();
    let store = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap();
    let room = RoomId::parse("lab").unwrap();
    let (digest, _) = store
        .put_content(
            &room,
            "text/plain",
            b"the report says 42",
            Timestamp::from_millis(1),
        )
        .await
        .unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE room_contents SET bytes = CAST('the report says 43' AS BLOB)",
            [],
        )
        .unwrap();
    let read = store.content(&room, &digest).await.unwrap_err();
    assert!(read.to_string().contains("no longer hash"), "{read}");
}
