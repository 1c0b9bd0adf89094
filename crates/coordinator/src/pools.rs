//! Budget pools (B8), the host's use cases: the host's administrator creates a pool, raises
//! its limit (B4), acknowledges its overrun (B5) and makes a Room draw on it; a Room's
//! members with `budget.read` read its gauge. The pool's ledger is the domain's
//! [`BudgetLedger`]: every change is decided there and committed with compare-and-swap on the
//! pool's revision; a Room's decisions move it in their own commits (the stores).

use agentroom_ports::domain::engine::{Effect, Env, Input, decide};
use agentroom_ports::domain::ids::{DerivedIds, PoolId, RoomId};
use agentroom_ports::domain::ledger::{BudgetLedger, LedgerError};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::review::NoContents;
use agentroom_ports::{PoolChangeError, PoolLogEntry, StoreError, StoredPool};

use crate::{Coordinator, CoordinatorError, InputId, OperatorInput, Outcome};

/// How many times a pool change is tried again while Rooms drawing on it commit.
const POOL_CHANGE_ATTEMPTS: u32 = 16;

/// What a raise or an acknowledgement of a pool did.
#[derive(Debug)]
pub struct PoolChanged {
    /// The pool after the change.
    pub pool: StoredPool,
    /// The Rooms drawing on it, each told that its pool changed (work waiting for budget may
    /// go ahead), with what that decided or why it could not be told.
    pub rooms: Vec<(RoomId, Result<Outcome, CoordinatorError>)>,
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

    /// Raises pool `id`'s limit by `by` (B4; lifts its overrun, B5), then tells the Rooms
    /// drawing on it.
    pub async fn raise_pool(
        &self,
        id: &PoolId,
        by: UsdMicros,
    ) -> Result<PoolChanged, CoordinatorError> {
        self.change_pool(id, |ledger| ledger.raise_limit(by)).await
    }

    /// Acknowledges pool `id`'s overrun (B5), then tells the Rooms drawing on it.
    pub async fn acknowledge_pool(&self, id: &PoolId) -> Result<PoolChanged, CoordinatorError> {
        self.change_pool(id, BudgetLedger::acknowledge_overrun)
            .await
    }

    async fn change_pool(
        &self,
        id: &PoolId,
        change: impl Fn(&mut BudgetLedger) -> Result<(), LedgerError>,
    ) -> Result<PoolChanged, CoordinatorError> {
        let store = &self.shared.store;
        for _ in 0..POOL_CHANGE_ATTEMPTS {
            let mut pool = self.pool(id).await?;
            pool.ledger.take_journal();
            change(&mut pool.ledger).map_err(|refusal| CoordinatorError::PoolRefused {
                pool: id.clone(),
                refusal,
            })?;
            let entries = pool.ledger.take_journal();
            let now = self.shared.clock.now();
            match store
                .change_pool(id, pool.revision, &pool.ledger, &entries, now)
                .await
            {
                Ok(_) => {
                    let pool = self.pool(id).await?;
                    let mut rooms = Vec::new();
                    for room in self.rooms_drawing_on(id).await? {
                        let told = match self.fresh_input_id() {
                            Ok(input) => {
                                self.submit(&room, input, OperatorInput::PoolChanged).await
                            }
                            Err(err) => Err(err),
                        };
                        rooms.push((room, told));
                    }
                    return Ok(PoolChanged { pool, rooms });
                }
                Err(PoolChangeError::Conflict { .. }) => {
                    tokio::time::sleep(self.shared.config.backoff).await;
                }
                Err(PoolChangeError::UnknownPool(pool)) => {
                    return Err(CoordinatorError::UnknownPool(pool));
                }
                Err(PoolChangeError::Store(err)) => return Err(err.into()),
            }
        }
        Err(CoordinatorError::PoolConflicted {
            pool: id.clone(),
            attempts: POOL_CHANGE_ATTEMPTS,
        })
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
