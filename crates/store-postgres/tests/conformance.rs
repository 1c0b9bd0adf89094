//! The planning conformance suite against PostgreSQL: every case on a fresh, migrated schema.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use agentroom_planning::PlanningRepository;

async fn postgres() -> Arc<dyn PlanningRepository> {
    let (_schema, store) = common::migrated_store().await;
    Arc::new(store)
}

agentroom_planning::planning_conformance!(postgres);
