//! The pool conformance suite (B8) on PostgreSQL, a fresh migrated schema per case: a Room's
//! commit moves its pool in the same transaction, across concurrent writers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use agentroom_store_postgres::PgRooms;

async fn postgres() -> Arc<PgRooms> {
    let (_schema, store) = common::migrated_rooms().await;
    Arc::new(store)
}

agentroom_ports::pool_conformance!(postgres);
