//! The artifact store conformance suite on PostgreSQL (a fresh migrated schema per case), and
//! what only the database can show: content changed behind the store's back is an error,
//! never returned, and the schema refuses a row the store could never have written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use agentroom_ports::ArtifactStore;
use agentroom_ports::StoreError;
use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::ids::{RoomId, Timestamp};
use agentroom_store_postgres::PgRooms;

async fn postgres() -> Arc<PgRooms> {
    let (_schema, store) = common::migrated_rooms().await;
    Arc::new(store)
}

agentroom_ports::artifact_conformance!(postgres);

const AT: Timestamp = Timestamp::from_millis(1_764_460_800_000);

fn lab() -> RoomId {
    RoomId::parse("lab").unwrap()
}

#[tokio::test]
async fn content_changed_behind_the_store_is_an_error_never_returned() {
    let (schema, store) = common::migrated_rooms().await;
    let body = b"# Findings\n\nLeases fence stale writers.";
    let (digest, _) = store
        .put_content(&lab(), "text/markdown", body, AT)
        .await
        .unwrap();
    // One byte flipped in place, the length kept (so the size CHECK still holds): what a
    // damaged page, a bad restore or a stray UPDATE leaves.
    let changed = sqlx::query(
        "UPDATE room_contents SET bytes = set_byte(bytes, 0, get_byte(bytes, 0) # 1) \
         WHERE room_id = $1 AND digest = $2",
    )
    .bind(lab().as_str())
    .bind(digest.as_str())
    .execute(store.pool())
    .await
    .unwrap();
    assert_eq!(changed.rows_affected(), 1);
    match store.content(&lab(), &digest).await {
        Err(error @ StoreError::Corrupt { .. }) => {
            assert!(error.to_string().contains(digest.as_str()), "{error}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Storing the same bytes again does not repair it (content is immutable; the row is
    // there), and the read still refuses it.
    let (again, put) = store
        .put_content(&lab(), "text/markdown", body, AT)
        .await
        .unwrap();
    assert_eq!(
        (again, put),
        (digest.clone(), agentroom_ports::Put::Present)
    );
    assert!(matches!(
        store.content(&lab(), &digest).await,
        Err(StoreError::Corrupt { .. })
    ));
    store.close().await;
    common::drop_schema(&schema).await;
}

#[tokio::test]
async fn the_schema_refuses_a_content_row_the_store_could_never_write() {
    let (schema, store) = common::migrated_rooms().await;
    let (digest, _) = store
        .put_content(&lab(), "text/plain", b"twelve bytes", AT)
        .await
        .unwrap();
    // A size that is not the bytes' length.
    let resized = sqlx::query(
        "UPDATE room_contents SET bytes = bytes || '\\x00'::bytea \
         WHERE room_id = $1 AND digest = $2",
    )
    .bind(lab().as_str())
    .bind(digest.as_str())
    .execute(store.pool())
    .await
    .unwrap_err();
    assert_eq!(check_violation(&resized), "room_contents_size_of_bytes");
    // Digests that are not `sha256:` and 64 lowercase hex digits.
    let upper = ContentDigest::of(b"x").as_str().to_uppercase();
    for bad in ["", "sha256:", "md5:00", upper.as_str()] {
        let refused = sqlx::query(
            "INSERT INTO room_contents (room_id, digest, media_type, bytes, size, created_at_ms) \
             VALUES ('lab', $1, 'text/plain', '\\x78'::bytea, 1, 0)",
        )
        .bind(bad)
        .execute(store.pool())
        .await
        .unwrap_err();
        assert_eq!(
            check_violation(&refused),
            "room_contents_digest_format",
            "{bad}"
        );
    }
    assert_eq!(
        store.content(&lab(), &digest).await.unwrap().unwrap().bytes,
        b"twelve bytes"
    );
    store.close().await;
    common::drop_schema(&schema).await;
}

/// The constraint a statement violated: a CHECK (SQLSTATE 23514), by name.
fn check_violation(error: &sqlx::Error) -> String {
    let database = error.as_database_error().expect("a database error");
    assert_eq!(database.code().as_deref(), Some("23514"), "{error}");
    database.constraint().expect("a constraint").to_owned()
}
