//! The redaction conformance suite on PostgreSQL (issue 18, a fresh migrated schema per
//! case), and what only the tables can show: after a memory entry's redaction its texts are
//! in no history row, no decision log and no snapshot of the Room, while the marker is (so the
//! snapshots were scrubbed, not skipped).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use agentroom_ports::domain::redaction::REDACTED_TEXT;
use agentroom_ports::redaction_conformance::memory_redaction;
use agentroom_store_postgres::PgRooms;

async fn postgres() -> Arc<PgRooms> {
    let (_schema, store) = common::migrated_rooms().await;
    Arc::new(store)
}

agentroom_ports::redaction_conformance!(postgres);

async fn count(store: &PgRooms, sql: &'static str, room: &str, needle: &str) -> i64 {
    sqlx::query_scalar(sql)
        .bind(room)
        .bind(format!("%{needle}%"))
        .fetch_one(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn m1_a_redacted_memory_text_is_in_no_row_of_the_rooms_history() {
    let (schema, store) = common::migrated_rooms().await;
    let redacted = memory_redaction(&store).await;
    let room = redacted.room.as_str();
    let history = "SELECT count(*) FROM room_history WHERE room_id = $1 AND delta::text LIKE $2";
    let logs = "SELECT count(*) FROM room_history WHERE room_id = $1 AND log::text LIKE $2";
    let snapshots =
        "SELECT count(*) FROM room_snapshots WHERE room_id = $1 AND state::text LIKE $2";
    for text in &redacted.texts {
        for sql in [history, logs, snapshots] {
            assert_eq!(count(&store, sql, room, text).await, 0, "{sql} {text}");
        }
    }
    assert_eq!(count(&store, history, room, "vault PIN").await, 0);
    assert!(count(&store, history, room, REDACTED_TEXT).await >= 2);
    assert!(
        count(&store, snapshots, room, REDACTED_TEXT).await >= 1,
        "a snapshot held the secret and was scrubbed"
    );
    store.close().await;
    common::drop_schema(&schema).await;
}
