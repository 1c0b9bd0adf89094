//! The conformance suite against the in-memory repository: checks the suite itself and the
//! service's rules without a database.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agentroom_planning::PlanningRepository;
use agentroom_planning::conformance::MemoryRepository;

async fn memory() -> Arc<dyn PlanningRepository> {
    Arc::new(MemoryRepository::default())
}

agentroom_planning::planning_conformance!(memory);
