//! The durable single-call runner: one provider call per operation, run under a lease with a
//! generation, heartbeated at most a third of the lease apart, aborted cooperatively when
//! fenced or cancelled (D3), its receipt recorded fenced on the generation and handed to the
//! operation's owner; recovery on start classifies every open operation from durable evidence
//! only (D2); named crash points abort the process for crash tests.
//!
//! The crate never decides: the Room rules are the domain's. [`DurableCall`] asks a
//! [`Decider`] the caller supplies, and the [`Runner`] reports outcomes to a [`ReceiptOwner`].
//! A call whose receipt is missing is uncertain and never replayed.

mod abort;
mod config;
pub mod crash;
mod durable;
mod error;
mod lease;
mod owner;
mod provider;
mod recovery;
mod runner;

pub use abort::{Abort, AbortReason, AbortTrigger};
pub use config::RunnerConfig;
pub use durable::{CallEnd, Completed, Decider, DurableCall, DurableOutcome, Reserved, settled_by};
pub use error::WorkflowError;
pub use owner::{Delivery, OwnerError, ReceiptOwner};
pub use provider::{CallOutcome, Provider};
pub use recovery::{RecoveryReport, resolution_outcome};
pub use runner::{CREATOR_GENERATION, Leased, RunOutcome, Runner};
