//! The redaction conformance suite against the in-memory fake: checks the suite itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_ports::conformance::memory;

agentroom_ports::redaction_conformance!(memory);
