//! A pure, in-memory driver of `decide` for tests and scripted runs: it holds a Room's state,
//! a logical clock and derived ids, and keeps every decision. It does no IO.

use uuid::Uuid;

use crate::catalog::CapabilityCatalog;
use crate::engine::{Decision, Env, Input, InputError, LogEntry};
use crate::ids::{DerivedIds, Timestamp};
use crate::state::RoomState;

/// The namespace the simulation derives each input's ids from.
const SIM_NAMESPACE: u128 = 0x6167_656e_7472_6f6f_6d2d_7369_6d00_0000;

/// A Room driven input by input, with a clock that ticks one second per input.
pub struct Simulation<C> {
    state: RoomState,
    catalog: C,
    clock: Timestamp,
    inputs: u64,
    log: Vec<LogEntry>,
}

impl<C: CapabilityCatalog> Simulation<C> {
    /// A simulation of `state`, resolving capabilities through `catalog`, starting at `start`.
    pub fn new(state: RoomState, catalog: C, start: Timestamp) -> Self {
        Self {
            state,
            catalog,
            clock: start,
            inputs: 0,
            log: Vec::new(),
        }
    }

    /// Decides `input` and, when it concerns this Room, keeps the new state. Ids derive from
    /// the input's sequence number, as production derives them from the persisted input id.
    pub fn apply(&mut self, input: Input) -> Result<Decision, InputError> {
        self.inputs += 1;
        self.clock = Timestamp::from_millis(self.clock.as_millis().saturating_add(1_000));
        let mut ids = DerivedIds::new(Uuid::from_u128(SIM_NAMESPACE ^ u128::from(self.inputs)));
        let mut env = Env {
            now: self.clock,
            ids: &mut ids,
            catalog: &self.catalog,
        };
        let decision = crate::engine::decide(&self.state, input, &mut env)?;
        self.state = decision.state.clone();
        self.log.extend(decision.log.iter().cloned());
        Ok(decision)
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
