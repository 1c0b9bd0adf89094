//! Time for the IO crates (the domain gets it passed in). Leases are timed by the database's
//! clock, not this one (D3).

use std::time::{SystemTime, UNIX_EPOCH};

use agentroom_domain::ids::Timestamp;

/// Where the current time comes from.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Timestamp::from_millis(millis)
    }
}
