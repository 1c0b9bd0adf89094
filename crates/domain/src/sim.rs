//! A pure, in-memory driver of `decide` for tests and scripted runs: it holds a Room's state,
//! a logical clock and derived ids, and keeps what a store would keep of each decision (the
//! log, the ledger entries, the closed operations, the accepted events). It does no IO.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::archive::ObjectiveRecord;
use crate::artifact::ContentDigest;
use crate::catalog::CapabilityCatalog;
use crate::engine::{Decision, Env, Input, InputError, LogEntry};
use crate::ids::{DerivedIds, EventId, OperationId, Timestamp};
use crate::ledger::{BudgetLedger, LedgerEntry, LedgerError};
use crate::state::{Operation, RoomState, Served};

/// Why the simulation refused an input; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The domain refused it.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The event was accepted before: like a store, the simulation commits each event's
    /// acceptance once (T1).
    #[error("event {0} was already accepted in this room")]
    AlreadyAccepted(EventId),
    /// Like a store, the simulation moves the pool the Room draws on with each decision
    /// (B8); the pool refused the decision's ledger entries, and nothing was kept.
    #[error("the pool refused the decision: {0}")]
    PoolRefused(LedgerError),
}

/// The namespace the simulation derives each input's ids from.
const SIM_NAMESPACE: u128 = 0x6167_656e_7472_6f6f_6d2d_7369_6d00_0000;

/// A Room driven input by input, with a clock that ticks one second per input.
pub struct Simulation<C> {
    state: RoomState,
    catalog: C,
    clock: Timestamp,
    inputs: u64,
    log: Vec<LogEntry>,
    ledger: Vec<LedgerEntry>,
    closed: BTreeMap<OperationId, Operation>,
    accepted: BTreeSet<EventId>,
    contents: BTreeMap<ContentDigest, String>,
    served: Option<Served>,
    pool: Option<BudgetLedger>,
    /// Whether closed objectives leave the state (as a host that keeps their records does).
    closing_out: bool,
    /// The records of those that left, as a store would keep them.
    records: Vec<ObjectiveRecord>,
}

impl<C: CapabilityCatalog> Simulation<C> {
    /// From now on, `pool` is the ledger of the pool the Room draws on (B8), held here as a
    /// store would hold it: each decision is checked against it and moves it.
    pub fn pool_ledger(&mut self, pool: BudgetLedger) {
        self.pool = Some(pool);
    }

    /// The pool's ledger as the decisions so far moved it; its journal is the pool's log.
    pub fn pool(&self) -> Option<&BudgetLedger> {
        self.pool.as_ref()
    }

    /// From now on, the host serves each role with `served` (B6: a Room quote below its
    /// model's admits no call).
    pub fn serve(&mut self, served: Served) {
        self.served = Some(served);
    }

    /// A simulation of `state`, resolving capabilities through `catalog`, starting at `start`.
    pub fn new(state: RoomState, catalog: C, start: Timestamp) -> Self {
        let ledger = state.ledger().journal().to_vec();
        Self {
            state,
            catalog,
            clock: start,
            inputs: 0,
            log: Vec::new(),
            ledger,
            closed: BTreeMap::new(),
            accepted: BTreeSet::new(),
            contents: BTreeMap::new(),
            served: None,
            pool: None,
            closing_out: false,
            records: Vec::new(),
        }
    }

    /// From now on, objectives that close and settle leave the state after each decision,
    /// their records kept here ([`crate::engine::close_out`]), as a host does.
    pub fn close_out(&mut self) {
        self.closing_out = true;
    }

    /// The records of the objectives that left the state, in the order they left.
    pub fn records(&self) -> &[ObjectiveRecord] {
        &self.records
    }

    /// The content kept under `digest`, as a host's artifact store would return it.
    pub fn content(&self, digest: &ContentDigest) -> Option<&str> {
        self.contents.get(digest).map(String::as_str)
    }

    /// Decides `input` and, when it concerns this Room, keeps the new state. Ids derive from
    /// the input's sequence number, as production derives them from the persisted input id.
    pub fn apply(&mut self, input: Input) -> Result<Decision, SimError> {
        if let Input::EventAccepted(event) = &input
            && self.accepted.contains(&event.id)
        {
            return Err(SimError::AlreadyAccepted(event.id));
        }
        self.inputs += 1;
        self.clock = Timestamp::from_millis(self.clock.as_millis().saturating_add(1_000));
        let mut ids = DerivedIds::new(Uuid::from_u128(SIM_NAMESPACE ^ u128::from(self.inputs)));
        // Like a host: a contribution's content is kept (within the Room's bounds) before
        // the decision that names it.
        if let Some(draft) = input.contribution_draft()
            && draft.check(self.state.policy().content()).is_ok()
        {
            for piece in draft.pieces() {
                let text = String::from_utf8_lossy(&piece.bytes).into_owned();
                self.contents.insert(ContentDigest::of(&piece.bytes), text);
            }
        }
        let mut env = Env {
            now: self.clock,
            ids: &mut ids,
            catalog: &self.catalog,
            contents: &self.contents,
            served: self.served.as_ref(),
            pool: self.pool.as_ref(),
            // A host reads the records an input names; every one is at hand here.
            archive: &self.records,
        };
        let mut decision = crate::engine::decide(&self.state, input, &mut env)?;
        if self.closing_out {
            crate::engine::close_out(&mut decision);
        }
        if decision.state.pool().is_some()
            && let Some(pool) = &mut self.pool
        {
            crate::pool::follow(pool, &decision.ledger).map_err(SimError::PoolRefused)?;
        }
        self.state = decision.state.clone();
        self.log.extend(decision.log.iter().cloned());
        self.ledger.extend(decision.ledger.iter().cloned());
        self.closed
            .extend(decision.closed.iter().map(|op| (op.id(), op.clone())));
        self.accepted.extend(decision.event);
        self.records.extend(decision.archived.iter().cloned());
        Ok(decision)
    }

    /// The Room's whole ledger log, from its opening entry.
    pub fn ledger(&self) -> &[LedgerEntry] {
        &self.ledger
    }

    /// Every closed operation, with its final state and charge.
    pub fn closed(&self) -> &BTreeMap<OperationId, Operation> {
        &self.closed
    }

    /// The operation of this id, open or closed.
    pub fn operation(&self, id: OperationId) -> Option<&Operation> {
        self.state.operation(id).or_else(|| self.closed.get(&id))
    }

    /// The current state.
    pub fn state(&self) -> &RoomState {
        &self.state
    }

    /// Every log entry so far.
    pub fn log(&self) -> &[LogEntry] {
        &self.log
    }

    /// The current logical time.
    pub fn now(&self) -> Timestamp {
        self.clock
    }
}
