//! The async ports of agentroom: what the coordinator and the workflow runner need from
//! storage, the agents and the outside world, as traits (async-trait, so they can be trait
//! objects). PostgreSQL and SQLite implement the stores; `test-util` has in-memory fakes for the unit
//! tests of the crates above; `conformance` has the suite every store runs.
//!
//! Guarantees the stores give (DESIGN.md "A durable call, step by step"):
//! - [`RoomStore::commit`] is one transaction: compare-and-swap on the revision, the change
//!   to history, new operation rows (idempotent on their deterministic ids, with the
//!   committer's lease), fenced receipts, ledger entries and outbox rows — all or nothing
//!   (D1, B1, B7, T5).
//! - [`WorkflowStore`] leases carry a generation; heartbeats and receipts are fenced on it
//!   and leases are timed by the database clock (D2, D3).

/// The domain, re-exported for crates that may depend on ports only (workflows, agents).
pub use agentroom_domain as domain;

pub mod agents;
pub mod artifacts;
pub mod clock;
pub mod context;
pub mod delta;
pub mod desk;
pub mod error;
pub mod history;
pub mod migrations;
pub mod notify;
pub mod pools;
pub mod random;
pub mod reconcile;
pub mod rooms;
pub mod scrub;
pub mod tokens;
pub mod workflows;

#[cfg(feature = "test-util")]
pub mod memory;
#[cfg(feature = "test-util")]
pub mod memory_tokens;

#[cfg(feature = "conformance")]
pub mod artifact_conformance;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "conformance")]
pub mod pool_conformance;
#[cfg(feature = "conformance")]
pub mod redaction_conformance;
#[cfg(feature = "conformance")]
pub mod token_conformance;

pub use agentroom_domain::archive::RecordKey;
pub use agents::{
    AgentCall, AgentOutcome, BriefError, Reasoner, ReasonerCall, Reviewer, ReviewerCall,
    Specialist, SpecialistCall,
};
pub use artifacts::{ArtifactStore, Put, StoredContent};
pub use clock::{Clock, SystemClock};
pub use context::{CallContext, ContextItem, DoesNotFit, Omitted};
pub use delta::{Delta, DeltaError, Sections};
pub use desk::{HostedDesk, Submission, SubmitError};
pub use error::BoxError;
pub use notify::{Notifier, NotifyError, Outbox, OutboxItem};
pub use pools::{PoolChange, PoolChangeError, PoolLogEntry, PoolStore, StoredPool};
pub use random::{NoRandomness, Random, SystemRandom};
pub use reconcile::{ReconcileError, Reconciler};
pub use rooms::{
    Commit, CommitError, Delivered, EventAppend, HistoryEntry, NewContent, OutboxPosition,
    Revision, RoomFeed, RoomSignal, RoomStore, StoreError, StoredRoom, refuse_in_group,
};
pub use tokens::{
    AuthError, Authenticated, IssuedToken, NewToken, TokenError, TokenId, TokenMaterial,
    TokenRecord, TokenStore,
};
pub use workflows::{
    ClaimedOperation, Heartbeat, LeaseGrant, MAX_LEASE, NewOperation, OperationFilter,
    OperationRecord, OperationStatus, Receipt, ReceiptWrite, Resolution, ResolutionOutcome,
    WorkflowStore, lease_millis,
};
