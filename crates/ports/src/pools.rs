//! Budget pools (B8): the host's owner- or campaign-wide limits that Rooms draw on. A pool is
//! stored as its ledger (balances and open holds) with a revision, and its log as rows that
//! replay to it. The host's administrator creates, raises and acknowledges a pool through
//! [`PoolStore`]; a Room's commit moves the pool it draws on in the same transaction
//! ([`RoomStore::commit`](crate::RoomStore::commit), with
//! [`agentroom_domain::pool::follow`]), across any number of processes on one database.

use agentroom_domain::ids::{PoolId, RoomId, Timestamp};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry, LedgerError};
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

/// A change of a pool's ledger, decided by the domain's [`BudgetLedger`] (a raise, B4; an
/// acknowledgement, B5) on the ledger as stored, under the pool's lock.
pub type PoolChange<'a> = &'a (dyn Fn(&mut BudgetLedger) -> Result<(), LedgerError> + Sync);

/// Why a change of a pool wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum PoolChangeError {
    /// The pool's ledger refused the change (a raise that is not positive, an
    /// acknowledgement without overrun).
    #[error("pool {pool}: {refusal}")]
    Refused {
        /// The pool.
        pool: PoolId,
        /// Why.
        refusal: LedgerError,
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

    /// Applies `change` to pool `id`'s ledger as stored, while holding the pool's lock (a
    /// Room's commit that moves the pool waits, and is never lost to it), and stores the
    /// result with what it appended as the next log rows; returns the pool as stored now. A
    /// change the ledger refuses writes nothing.
    async fn change_pool(
        &self,
        id: &PoolId,
        change: PoolChange<'_>,
        at: Timestamp,
    ) -> Result<StoredPool, PoolChangeError>;

    /// Pool `id`'s whole log, in order (empty when there is no such pool).
    async fn pool_log(&self, id: &PoolId) -> Result<Vec<PoolLogEntry>, StoreError>;

    /// Every pool's id, in order.
    async fn pools(&self) -> Result<Vec<PoolId>, StoreError>;
}
