//! The store conformance suite (rooms, workflows, outbox) against PostgreSQL: every case on a
//! fresh, migrated schema.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use agentroom_store_postgres::PgRooms;

async fn postgres() -> Arc<PgRooms> {
    let (_schema, store) = common::migrated_rooms().await;
    Arc::new(store)
}

agentroom_ports::store_conformance!(postgres);
