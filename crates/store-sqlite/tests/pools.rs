//! The pool conformance suite (B8) on SQLite: a Room's commit moves its pool in the same
//! transaction.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agentroom_store_sqlite::{Durability, SqliteRooms, migrate};

async fn fresh() -> Arc<SqliteRooms> {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("agentroom.db");
    migrate::up(&path).unwrap();
    Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash).unwrap())
}

agentroom_ports::pool_conformance!(fresh);
