//! The store conformance suite (`agentroom_ports::store_conformance!`) on SQLite: rooms,
//! operations, the ledger and the outbox, a fresh migrated file per test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agentroom_store_sqlite::{Durability, SqliteRooms, migrate};

async fn fresh() -> Arc<SqliteRooms> {
    // The directory lives as long as the test process; each test gets its own.
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("agentroom.db");
    migrate::up(&path).unwrap();
    Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash).unwrap())
}

agentroom_ports::store_conformance!(fresh);
