//! The durable single-call runner: one provider call per operation, run under a lease with a
//! generation, heartbeated at most a third of the lease apart, aborted cooperatively when
//! fenced or cancelled (D3); recovery on start classifies every open operation from durable
//! evidence only (D2); named crash points abort the process for crash tests.
//!
//! The crate never decides and never calls back into its caller: a run returns what became of
//! the call ([`Executed`]) and recovery what the Rooms must decide ([`Recovery`]), both as the
//! domain's [`CallEvent`](agentroom_ports::domain::engine::CallEvent)s, which the coordinator
//! decides and commits. A call whose receipt is missing is uncertain and never replayed.

mod abort;
mod beat;
mod config;
pub mod crash;
mod error;
mod lease;
mod provider;
mod recovery;
mod runner;

pub use abort::{Abort, AbortReason, AbortTrigger};
pub use config::{DEFAULT_NOT_SENT_WINDOW, RunnerConfig};
pub use error::WorkflowError;
pub use provider::{CallOutcome, Provider};
pub use recovery::{Due, Found, Recovery, RecoveryReport, resolution_outcome};
pub use runner::{CREATOR_GENERATION, Executed, Leased, Runner};
