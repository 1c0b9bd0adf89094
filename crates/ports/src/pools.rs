//! Budget pools (B8): the host's owner- or campaign-wide limits that Rooms draw on. A pool is
//! stored as its ledger (balances and open holds) with a revision, and its log as rows that
//! replay to it. The host's administrator creates, raises and acknowledges a pool through
//! [`PoolStore`]; a Room's commit moves the pool it draws on in the same transaction
//! ([`RoomStore::commit`](crate::RoomStore::commit), with
//! [`agentroom_domain::pool::follow`]), across any number of processes on one database.

use agentroom_domain::ids::{PoolId, RoomId, Timestamp};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry};
use async_trait::async_trait;

use crate::rooms::StoreError;

/// A pool as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPool {
    /// Its id.
    pub id: PoolId,
    /// Its ledger: balances, open holds, the overrun that stopped it (B2–B5).
    pub ledger: BudgetLedger,
    /// 1 when created, +1 per change (a Room's commit that moved it included).
    pub revision: i64,
}

/// One row of a pool's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolLogEntry {
    /// Its position in the pool's log, from 1.
    pub seq: i64,
    /// The Room whose commit appended it; `None` for the host's own (opening, raise,
    /// acknowledgement).
    pub room: Option<RoomId>,
    /// The entry.
    pub entry: LedgerEntry,
    /// When it was committed (the committer's clock).
    pub at: Timestamp,
}

/// Why a change of a pool wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum PoolChangeError {
    /// Another writer moved the pool (a Room's commit, or another administrator): reload,
    /// decide again.
    #[error("pool {pool} is at revision {actual}, the change expected {expected}")]
    Conflict {
        /// The pool.
        pool: PoolId,
        /// What the change expected.
        expected: i64,
        /// What is stored.
        actual: i64,
    },
    /// No such pool.
    #[error("no pool {0}")]
    UnknownPool(PoolId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The host's pools.
#[async_trait]
pub trait PoolStore: Send + Sync {
    /// Creates pool `id` with `ledger`, freshly opened (its journal holds its opening, which
    /// becomes the first row of its log). [`StoreError::PoolExists`] if it exists.
    async fn create_pool(
        &self,
        id: &PoolId,
        ledger: &BudgetLedger,
        at: Timestamp,
    ) -> Result<(), StoreError>;

    /// The pool of this id, if any.
    async fn load_pool(&self, id: &PoolId) -> Result<Option<StoredPool>, StoreError>;

    /// Stores `ledger` as pool `id`'s new ledger and `entries` (what the change appended) as
    /// its next log rows, with compare-and-swap on `expected`; returns the new revision.
    async fn change_pool(
        &self,
        id: &PoolId,
        expected: i64,
        ledger: &BudgetLedger,
        entries: &[LedgerEntry],
        at: Timestamp,
    ) -> Result<i64, PoolChangeError>;

    /// Pool `id`'s whole log, in order (empty when there is no such pool).
    async fn pool_log(&self, id: &PoolId) -> Result<Vec<PoolLogEntry>, StoreError>;

    /// Every pool's id, in order.
    async fn pools(&self) -> Result<Vec<PoolId>, StoreError>;
}
