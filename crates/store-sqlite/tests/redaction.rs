//! The redaction conformance suite on SQLite (issue 18), and what only the tables can show:
//! after a memory entry's redaction its texts are in no history row, no decision log and no
//! snapshot of the Room, while the marker is (so the snapshots were scrubbed, not skipped).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agentroom_ports::domain::redaction::REDACTED_TEXT;
use agentroom_ports::redaction_conformance::{SECRET, memory_redaction};
use agentroom_store_sqlite::{Durability, SqliteRooms, migrate};

async fn fresh() -> Arc<SqliteRooms> {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("agentroom.db");
    migrate::up(&path).unwrap();
    Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash).unwrap())
}

agentroom_ports::redaction_conformance!(fresh);

fn count(connection: &rusqlite::Connection, sql: &str, room: &str, needle: &str) -> i64 {
    connection
        .query_row(sql, rusqlite::params![room, format!("%{needle}%")], |row| {
            row.get(0)
        })
        .unwrap()
}

#[tokio::test]
async fn m1_a_redacted_memory_text_is_in_no_row_of_the_rooms_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    migrate::up(&path).unwrap();
    let store = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap();
    let redacted = memory_redaction(&store).await;
    let room = redacted.room.as_str();
    let connection = rusqlite::Connection::open(&path).unwrap();
    let history = "SELECT count(*) FROM room_history WHERE room_id = ?1 AND delta LIKE ?2";
    let logs = "SELECT count(*) FROM room_history WHERE room_id = ?1 AND log LIKE ?2";
    let snapshots = "SELECT count(*) FROM room_snapshots WHERE room_id = ?1 AND state LIKE ?2";
    for text in &redacted.texts {
        for sql in [history, logs, snapshots] {
            assert_eq!(count(&connection, sql, room, text), 0, "{sql} {text}");
        }
    }
    assert_eq!(count(&connection, history, room, "vault PIN"), 0);
    assert!(
        count(&connection, history, room, REDACTED_TEXT) >= 2,
        "the deltas say the marker"
    );
    assert!(
        count(&connection, snapshots, room, REDACTED_TEXT) >= 1,
        "a snapshot held the secret and was scrubbed"
    );
    assert!(!SECRET.is_empty());
}
