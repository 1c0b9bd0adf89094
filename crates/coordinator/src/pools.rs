//! Budget pools (B8), the host's use cases: the host's administrator creates a pool, raises
//! its limit (B4), acknowledges its overrun (B5) and makes a Room draw on it; a Room's
//! members with `budget.read` read its gauge. The pool's ledger is the domain's
//! [`BudgetLedger`]: every change is decided there and committed with compare-and-swap on the
//! pool's revision; a Room's decisions move it in their own commits (the stores).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use agentroom_ports::domain::engine::{Effect, Env, Input, decide};
use agentroom_ports::domain::ids::{DerivedIds, PoolId, RoomId};
use agentroom_ports::domain::ledger::BudgetLedger;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::review::NoContents;
use agentroom_ports::{PoolChange, PoolChangeError, PoolLogEntry, StoreError, StoredPool};

use crate::{Coordinator, CoordinatorError, InputId, OperatorInput, Outcome};

/// A background pass reads every Room's pool this often (in passes); in between, only the
/// Rooms the last reading found drawing on one. A pool attached by another process is seen
/// within this many passes.
pub(crate) const POOL_SCAN_EVERY: u32 = 10;

/// Which Rooms draw on a pool, as the background passes last read them.
#[derive(Debug, Default)]
pub(crate) struct PoolScan {
    passes: AtomicU32,
    pooled: Mutex<HashSet<RoomId>>,
}

impl PoolScan {
    /// Whether this pass reads every Room (counted once per pass).
    pub(crate) fn full_pass(&self) -> bool {
        self.passes
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(POOL_SCAN_EVERY)
    }

    /// Whether `room` drew on a pool when last read.
    pub(crate) fn pooled(&self, room: &RoomId) -> bool {
        self.pooled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(room)
    }

    /// The Rooms that drew on a pool when last read.
    pub(crate) fn rooms(&self) -> Vec<RoomId> {
        self.pooled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    fn note(&self, room: &RoomId, pooled: bool) {
        let mut known = self.pooled.lock().unwrap_or_else(PoisonError::into_inner);
        if pooled {
            known.insert(room.clone());
        } else {
            known.remove(room);
        }
    }
}

/// A pool's log checked against its ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolAudit {
    /// Whether the log replays to the stored ledger (B7, B8).
    pub replays: bool,
    /// Charged to the pool, per Room, from its log.
    pub charged_by_room: Vec<(RoomId, UsdMicros)>,
}

impl Coordinator {
    /// Creates pool `id` with `limit` (zero or more).
    pub async fn create_pool(
        &self,
        id: &PoolId,
        limit: UsdMicros,
    ) -> Result<StoredPool, CoordinatorError> {
        let ledger =
            BudgetLedger::open(limit).map_err(|refusal| CoordinatorError::PoolRefused {
                pool: id.clone(),
                refusal,
            })?;
        match self
            .shared
            .store
            .create_pool(id, &ledger, self.shared.clock.now())
            .await
        {
            Err(StoreError::PoolExists(id)) => return Err(CoordinatorError::PoolExists(id)),
            created => created?,
        }
        self.pool(id).await
    }

    /// The pool of this id.
    pub async fn pool(&self, id: &PoolId) -> Result<StoredPool, CoordinatorError> {
        self.shared
            .store
            .load_pool(id)
            .await?
            .ok_or_else(|| CoordinatorError::UnknownPool(id.clone()))
    }

    /// Every pool's id.
    pub async fn pools(&self) -> Result<Vec<PoolId>, CoordinatorError> {
        Ok(self.shared.store.pools().await?)
    }

    /// Pool `id`'s whole log.
    pub async fn pool_log(&self, id: &PoolId) -> Result<Vec<PoolLogEntry>, CoordinatorError> {
        self.pool(id).await?;
        Ok(self.shared.store.pool_log(id).await?)
    }

    /// Checks pool `id`'s log against its ledger, and sums what each Room was charged.
    pub async fn audit_pool(&self, id: &PoolId) -> Result<PoolAudit, CoordinatorError> {
        let pool = self.pool(id).await?;
        let log = self.shared.store.pool_log(id).await?;
        let entries: Vec<_> = log.iter().map(|row| row.entry.clone()).collect();
        let replays = BudgetLedger::replay(&entries).is_ok_and(|replayed| replayed == pool.ledger);
        let mut charged: Vec<(RoomId, UsdMicros)> = Vec::new();
        for row in &log {
            let Some(room) = &row.room else { continue };
            let amount = match row.entry {
                agentroom_ports::domain::ledger::LedgerEntry::Settled { charged, .. } => charged,
                agentroom_ports::domain::ledger::LedgerEntry::SettlementRefused {
                    reserved,
                    ..
                } => reserved,
                _ => continue,
            };
            match charged.iter_mut().find(|(r, _)| r == room) {
                Some((_, total)) => {
                    *total = UsdMicros::new(total.micros().saturating_add(amount.micros()));
                }
                None => charged.push((room.clone(), amount)),
            }
        }
        Ok(PoolAudit {
            replays,
            charged_by_room: charged,
        })
    }

    /// Raises pool `id`'s limit by `by` (B4; lifts its overrun, B5). The Rooms drawing on it
    /// go ahead at their host's next pass (`resume_on_pool`): this process may run no
    /// agents, so it dispatches nothing.
    pub async fn raise_pool(
        &self,
        id: &PoolId,
        by: UsdMicros,
    ) -> Result<StoredPool, CoordinatorError> {
        self.change_pool(id, &|ledger: &mut BudgetLedger| ledger.raise_limit(by))
            .await
    }

    /// Acknowledges pool `id`'s overrun (B5); its Rooms go ahead at their host's next pass.
    pub async fn acknowledge_pool(&self, id: &PoolId) -> Result<StoredPool, CoordinatorError> {
        self.change_pool(id, &BudgetLedger::acknowledge_overrun)
            .await
    }

    /// Applies `change`, decided by the pool's ledger under the pool's lock.
    async fn change_pool(
        &self,
        id: &PoolId,
        change: PoolChange<'_>,
    ) -> Result<StoredPool, CoordinatorError> {
        let now = self.shared.clock.now();
        match self.shared.store.change_pool(id, change, now).await {
            Ok(pool) => Ok(pool),
            Err(PoolChangeError::Refused { pool, refusal }) => {
                Err(CoordinatorError::PoolRefused { pool, refusal })
            }
            Err(PoolChangeError::UnknownPool(pool)) => Err(CoordinatorError::UnknownPool(pool)),
            Err(PoolChangeError::Store(err)) => Err(err.into()),
        }
    }

    /// The Rooms of this store that draw on pool `id`.
    pub async fn rooms_drawing_on(&self, id: &PoolId) -> Result<Vec<RoomId>, CoordinatorError> {
        let store = &self.shared.store;
        let mut drawing = Vec::new();
        let mut after: Option<RoomId> = None;
        loop {
            let page = store.rooms(after.as_ref(), 256).await?;
            let Some(last) = page.last().cloned() else {
                return Ok(drawing);
            };
            for room in page {
                if let Some(stored) = store.load(&room).await?
                    && stored.state.pool() == Some(id)
                {
                    drawing.push(room);
                }
            }
            after = Some(last);
        }
    }

    /// The host's administrator makes `room` draw on `pool` (which must exist), or on none
    /// (B8). The domain refuses it while the Room has open calls.
    pub async fn attach_pool(
        &self,
        room: &RoomId,
        id: InputId,
        pool: Option<PoolId>,
    ) -> Result<Outcome, CoordinatorError> {
        if let Some(pool) = &pool {
            self.pool(pool).await?;
        }
        self.submit(room, id, OperatorInput::AttachPool { pool })
            .await
    }

    /// B8: tells `room` that its pool changed when that would let its waiting work go ahead
    /// now: another Room's settlement or release freed the pool, and nothing else would
    /// wake this one. Whether it would is the domain's answer, asked without committing
    /// (`decide` of [`Input::PoolChanged`] on the state as stored); only a decision that
    /// reserves a call is submitted, so an idle Room writes nothing. Returns whether it did.
    pub async fn resume_on_pool(&self, room: &RoomId) -> Result<bool, CoordinatorError> {
        let stored = self.room(room).await?;
        self.shared
            .pool_scan
            .note(room, stored.state.pool().is_some());
        let Some(id) = stored.state.pool() else {
            return Ok(false);
        };
        let Some(pool) = self.shared.store.load_pool(id).await? else {
            return Ok(false);
        };
        let reserves = {
            let mut ids = DerivedIds::new(uuid::Uuid::nil());
            let mut env = Env {
                now: self.shared.clock.now(),
                ids: &mut ids,
                catalog: &*self.shared.catalog,
                contents: &NoContents,
                served: self.shared.served.as_ref(),
                pool: Some(&pool.ledger),
                archive: &agentroom_ports::domain::archive::NoArchive,
            };
            decide(&stored.state, Input::PoolChanged, &mut env)?
                .effects
                .iter()
                .any(|effect| matches!(effect, Effect::ReserveAndCall(_)))
        };
        if !reserves {
            return Ok(false);
        }
        self.submit(room, self.fresh_input_id()?, OperatorInput::PoolChanged)
            .await?;
        Ok(true)
    }

    /// The pool `room` draws on, as it is now, if it draws on one (its gauge, for members
    /// with `budget.read`). A pool that is gone reads as none.
    pub async fn room_pool(&self, room: &RoomId) -> Result<Option<StoredPool>, CoordinatorError> {
        let state = self.room(room).await?.state;
        match state.pool() {
            Some(id) => Ok(self.shared.store.load_pool(id).await?),
            None => Ok(None),
        }
    }
}
