//! The pool conformance suite against the in-memory fake: checks the suite itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_ports::pool_conformance::memory;

agentroom_ports::pool_conformance!(memory);
