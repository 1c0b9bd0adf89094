//! Durable operations: one row per provider call, claimed with a lease and a generation,
//! heartbeated, fenced, with a receipt written once (B1, D2, D3).

use std::time::Duration;

use agentroom_domain::engine::{CallEvent, CallRequest, CallResult, Charge};
use agentroom_domain::ids::{OperationId, RoomId, Timestamp};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::rooms::StoreError;

/// An operation to create, with the lease its creator takes (so the creator needs no
/// separate claim: DESIGN.md step 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOperation {
    /// The Room.
    pub room: RoomId,
    /// The call, with its deterministic id and reservation.
    pub request: CallRequest,
    /// The creator's lease, if it will run the call itself.
    pub lease: Option<LeaseGrant>,
}

/// The longest lease a store grants; a longer one is cut to it (a call that needs more keeps
/// its lease by heartbeats). Keeps `now + lease` far from overflowing in every database.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// A lease duration in whole milliseconds, at most [`MAX_LEASE`]: what stores write.
pub fn lease_millis(duration: Duration) -> i64 {
    let capped = duration.min(MAX_LEASE).as_millis();
    i64::try_from(capped).unwrap_or(i64::MAX)
}

/// A lease to take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    /// Who holds it (a runner id).
    pub owner: String,
    /// For how long, by the database clock.
    pub duration: Duration,
}

/// What a call returned, written once, fenced on the lease generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// What it cost.
    pub charge: Charge,
    /// What it returned.
    pub result: CallResult,
    /// The model that served the call, when its provider names one (the ledger's cost by
    /// model); receipts stored before it was recorded read back without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the call's prompt left out to fit its input bound (C1), each named by kind, id
    /// and digest; empty when nothing was (and on receipts stored before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted: Vec<String>,
}

impl Receipt {
    /// The call event it reports to the Room: returned, with its charge and result.
    pub fn event(&self) -> CallEvent {
        CallEvent::Returned {
            charge: self.charge,
            result: self.result.clone(),
        }
    }
}

/// Where an operation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    /// Created; a runner holds (or held) its lease; no receipt yet.
    InFlight,
    /// A receipt is written; its owner has not applied it yet.
    Receipted,
    /// The receipt is applied to the Room's state.
    Applied,
    /// No receipt and no live lease: the call may or may not have run (D2). Its reservation
    /// is held and it is never replayed.
    Uncertain,
    /// Recovery gave up after its bounded attempts; an operator must resolve it.
    DeadLetter,
    /// An operator resolved it.
    Resolved,
}

impl OperationStatus {
    /// The name on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationStatus::InFlight => "in_flight",
            OperationStatus::Receipted => "receipted",
            OperationStatus::Applied => "applied",
            OperationStatus::Uncertain => "uncertain",
            OperationStatus::DeadLetter => "dead_letter",
            OperationStatus::Resolved => "resolved",
        }
    }

    /// Parses [`OperationStatus::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        [
            OperationStatus::InFlight,
            OperationStatus::Receipted,
            OperationStatus::Applied,
            OperationStatus::Uncertain,
            OperationStatus::DeadLetter,
            OperationStatus::Resolved,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// What an operator decided about an uncertain or dead-lettered call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionOutcome {
    /// It ran (`--confirm-succeeded`).
    Succeeded,
    /// It did not run, or failed (`--confirm-failed`).
    Failed,
}

impl ResolutionOutcome {
    /// The name on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolutionOutcome::Succeeded => "succeeded",
            ResolutionOutcome::Failed => "failed",
        }
    }
}

/// An operator's resolution, recorded with who and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// What they confirmed.
    pub outcome: ResolutionOutcome,
    /// Who.
    pub operator: String,
    /// Why.
    pub reason: String,
    /// When.
    pub at: Timestamp,
}

/// An operation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRecord {
    /// The Room.
    pub room: RoomId,
    /// The call.
    pub request: CallRequest,
    /// Where it stands.
    pub status: OperationStatus,
    /// The current lease generation (0 before any lease).
    pub generation: i64,
    /// Who holds the lease, if anyone.
    pub lease_owner: Option<String>,
    /// Whether the lease has expired (by the database clock).
    pub lease_expired: bool,
    /// Whether an abort was asked for (D3).
    pub cancel_requested: bool,
    /// Its receipt, once written.
    pub receipt: Option<Receipt>,
    /// Recovery attempts so far.
    pub recovery_attempts: u32,
    /// Why it was dead-lettered.
    pub dead_letter_reason: Option<String>,
    /// An operator's resolution.
    pub resolution: Option<Resolution>,
}

impl OperationRecord {
    /// The operation's id.
    pub fn op(&self) -> OperationId {
        self.request.op
    }
}

/// A claimed operation: the caller holds its lease at `generation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedOperation {
    /// The operation.
    pub record: OperationRecord,
    /// The generation the claim took.
    pub generation: i64,
}

/// A heartbeat's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// The lease is extended; `cancel` says whether an abort was asked for.
    Extended {
        /// Abort cooperatively (D3).
        cancel: bool,
    },
    /// The generation is no longer current: stop, the result will be dropped.
    Fenced,
}

/// A receipt write's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptWrite {
    /// Written now.
    Recorded,
    /// The generation is no longer current, or a receipt exists: dropped.
    Fenced,
}

/// Which operations to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationFilter {
    /// Everything not applied or resolved.
    Open,
    /// Only this status.
    Status(OperationStatus),
}

/// Durable operations.
#[async_trait]
pub trait WorkflowStore: Send + Sync {
    /// Claims up to `limit` in-flight operations whose lease has expired (or never existed),
    /// bumping their generation and counting a recovery attempt; concurrent claimers never
    /// get the same operation.
    async fn claim_expired(
        &self,
        lease: LeaseGrant,
        limit: usize,
    ) -> Result<Vec<ClaimedOperation>, StoreError>;

    /// Extends the lease only if `generation` is still current.
    async fn heartbeat(
        &self,
        op: OperationId,
        generation: i64,
        duration: Duration,
    ) -> Result<Heartbeat, StoreError>;

    /// Extends every lease of `leases` (operation, generation) whose generation is still
    /// current, in one write transaction: what a process's one heartbeat per interval sends
    /// for all the calls it runs (issue 21, item 4). The answers are in the order of `leases`.
    /// A store that cannot do it in one transaction extends them one by one (this default).
    async fn heartbeat_all(
        &self,
        leases: &[(OperationId, i64)],
        duration: Duration,
    ) -> Result<Vec<Heartbeat>, StoreError> {
        let mut answers = Vec::with_capacity(leases.len());
        for (op, generation) in leases {
            answers.push(self.heartbeat(*op, *generation, duration).await?);
        }
        Ok(answers)
    }

    /// Writes the receipt once, only if `generation` is still current.
    async fn record_receipt(
        &self,
        op: OperationId,
        generation: i64,
        receipt: &Receipt,
    ) -> Result<ReceiptWrite, StoreError>;

    /// Marks an in-flight operation without a receipt uncertain (D2), fenced on `generation`.
    async fn mark_uncertain(&self, op: OperationId, generation: i64) -> Result<bool, StoreError>;

    /// Claims up to `limit` in-flight operations whose lease has expired (or never existed)
    /// and marks them uncertain in the same write (D2: a call whose process stopped before
    /// its receipt is never replayed), bumping their generation and counting a recovery
    /// attempt, as [`WorkflowStore::claim_expired`] then [`WorkflowStore::mark_uncertain`]
    /// would: what recovery does with a dead process's calls, one write per batch instead of
    /// one per call (issue 21, item 3). The records are returned uncertain. A store that
    /// cannot do it in one write does those two steps (this default): a claim it could not
    /// mark is left out, in flight under `lease`, for a later pass.
    async fn claim_expired_uncertain(
        &self,
        lease: LeaseGrant,
        limit: usize,
    ) -> Result<Vec<ClaimedOperation>, StoreError> {
        let mut marked = Vec::new();
        for mut claim in self.claim_expired(lease, limit).await? {
            if self
                .mark_uncertain(claim.record.op(), claim.generation)
                .await?
            {
                claim.record.status = OperationStatus::Uncertain;
                marked.push(claim);
            }
        }
        Ok(marked)
    }

    /// Counts one more recovery attempt on an uncertain operation (recovery asked its
    /// reconciler again), so the bound on attempts holds across restarts; the new count, or
    /// `None` when the operation is not uncertain.
    async fn count_recovery_attempt(&self, op: OperationId) -> Result<Option<u32>, StoreError>;

    /// Moves an operation to the dead letters with a reason.
    async fn dead_letter(&self, op: OperationId, reason: &str) -> Result<bool, StoreError>;

    /// Records an operator's resolution of an uncertain or dead-lettered operation; false if
    /// it is neither.
    async fn resolve(&self, op: OperationId, resolution: &Resolution) -> Result<bool, StoreError>;

    /// One operation.
    async fn operation(&self, op: OperationId) -> Result<Option<OperationRecord>, StoreError>;

    /// Operations matching `filter`, oldest first.
    async fn operations(&self, filter: OperationFilter)
    -> Result<Vec<OperationRecord>, StoreError>;

    /// The operations of `room` only (every status when `status` is `None`), oldest first, in
    /// one query: the Room-scoped views (budget breakdown, the operator's list) read these,
    /// never every Room's operations.
    async fn room_operations(
        &self,
        room: &RoomId,
        status: Option<OperationStatus>,
    ) -> Result<Vec<OperationRecord>, StoreError>;

    /// Gives up the lease of an in-flight operation without a receipt now, only if
    /// `generation` is still current (a graceful shutdown hands its unfinished calls over):
    /// the lease expires at once by the database clock, so the next recovery of any process
    /// claims it without waiting out the lease, and the generation moves on, so a heartbeat
    /// or receipt of the releasing holder still on its way is fenced. False when fenced.
    async fn release_lease(&self, op: OperationId, generation: i64) -> Result<bool, StoreError>;
}
