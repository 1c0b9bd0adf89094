//! The artifact conformance suite against the in-memory fake: checks the suite itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_ports::artifact_conformance::memory;

agentroom_ports::artifact_conformance!(memory);
