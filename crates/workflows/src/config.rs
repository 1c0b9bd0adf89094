//! How the runner runs: lease length, heartbeat cadence (at most a third of the lease), retry
//! and recovery bounds.

use std::time::Duration;

use agentroom_ports::LeaseGrant;
use agentroom_ports::domain::ids::OperationId;

/// The runner's settings. The heartbeat interval never exceeds a third of the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerConfig {
    runner: String,
    lease: Duration,
    heartbeat: Duration,
    abort_grace: Duration,
    not_sent_retries: u32,
    not_sent_window: Duration,
    backoff: Duration,
    backoff_max: Duration,
    store_retries: u32,
    max_recovery_attempts: u32,
    claim_batch: usize,
}

impl RunnerConfig {
    /// Defaults for runner `runner` holding leases of `lease`: heartbeat every lease/3; a call
    /// that reaches nothing is retried with backoff from 1 s to 30 s (jittered) for up to
    /// [`DEFAULT_NOT_SENT_WINDOW`]; three recovery attempts before a dead letter.
    pub fn new(runner: impl Into<String>, lease: Duration) -> Self {
        // Stores grant at most MAX_LEASE; heartbeats must be timed on what they grant.
        let lease = lease.min(agentroom_ports::MAX_LEASE);
        let heartbeat = lease / 3;
        Self {
            runner: runner.into(),
            lease,
            heartbeat,
            abort_grace: heartbeat,
            not_sent_retries: u32::MAX,
            not_sent_window: DEFAULT_NOT_SENT_WINDOW,
            backoff: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            store_retries: 3,
            max_recovery_attempts: 3,
            claim_batch: 512,
        }
    }

    /// Heartbeats every `every`, but never more than a third of the lease apart.
    pub fn with_heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every.min(self.lease / 3);
        self
    }

    /// How long a provider may take to stop after its abort fired before it is dropped.
    pub fn with_abort_grace(mut self, grace: Duration) -> Self {
        self.abort_grace = grace;
        self
    }

    /// Retries of a call that reached nothing, with exponential backoff from `base` up to
    /// `max` (or the provider's `retry_after`, if longer, up to `max`).
    pub fn with_not_sent_retries(mut self, retries: u32, base: Duration, max: Duration) -> Self {
        self.not_sent_retries = retries;
        self.backoff = base;
        self.backoff_max = max.max(base);
        self
    }

    /// How long a call that reaches nothing is retried before it ends as unreachable (its
    /// objective, or its pending message, then stops for attention). A provider restart or a
    /// short outage stays well inside it.
    pub fn with_not_sent_window(mut self, window: Duration) -> Self {
        self.not_sent_window = window;
        self
    }

    /// Retries of a failed store write (receipt, uncertain mark), with the same backoff.
    pub fn with_store_retries(mut self, retries: u32) -> Self {
        self.store_retries = retries;
        self
    }

    /// Recovery attempts on an uncertain operation before it is dead-lettered (at least 1).
    pub fn with_max_recovery_attempts(mut self, attempts: u32) -> Self {
        self.max_recovery_attempts = attempts.max(1);
        self
    }

    /// How many expired operations recovery claims at once (at least 1).
    pub fn with_claim_batch(mut self, batch: usize) -> Self {
        self.claim_batch = batch.max(1);
        self
    }

    /// The runner's id (the lease owner).
    pub fn runner(&self) -> &str {
        &self.runner
    }

    /// The lease length.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The lease this runner takes.
    pub fn lease_grant(&self) -> LeaseGrant {
        LeaseGrant {
            owner: self.runner.clone(),
            duration: self.lease,
        }
    }

    /// The heartbeat interval (at most lease/3).
    pub fn heartbeat(&self) -> Duration {
        self.heartbeat
    }

    /// The abort grace.
    pub fn abort_grace(&self) -> Duration {
        self.abort_grace
    }

    /// Retries of an unsent call.
    pub fn not_sent_retries(&self) -> u32 {
        self.not_sent_retries
    }

    /// How long an unsent call is retried.
    pub fn not_sent_window(&self) -> Duration {
        self.not_sent_window
    }

    /// Retries of a failed store write.
    pub fn store_retries(&self) -> u32 {
        self.store_retries
    }

    /// Recovery attempts before a dead letter.
    pub fn max_recovery_attempts(&self) -> u32 {
        self.max_recovery_attempts
    }

    /// Claims per batch.
    pub fn claim_batch(&self) -> usize {
        self.claim_batch
    }

    /// The wait before store retry `attempt` (1-based): 100 ms doubling, at most 2 s — a
    /// store hiccup is short, and a receipt write must fit a graceful stop's grace.
    pub fn store_backoff(&self, attempt: u32) -> Duration {
        let factor = 1_u32 << attempt.saturating_sub(1).min(16);
        Duration::from_millis(100)
            .saturating_mul(factor)
            .min(Duration::from_secs(2))
    }

    /// The wait before retry `attempt` (1-based): `base · 2^(attempt-1)`, at least
    /// `retry_after`, at most the maximum.
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let factor = 1_u32 << attempt.saturating_sub(1).min(16);
        self.backoff
            .saturating_mul(factor)
            .max(retry_after.unwrap_or_default())
            .min(self.backoff_max)
    }

    /// The wait before retry `attempt` of call `op`: [`RunnerConfig::backoff`] less a jitter
    /// of up to half of it, drawn from the call's id and the attempt (no randomness source:
    /// calls that failed together spread out, and the same call waits the same way on every
    /// run). A provider's `retry_after` is never cut short.
    pub fn jittered_backoff(
        &self,
        op: OperationId,
        attempt: u32,
        retry_after: Option<Duration>,
    ) -> Duration {
        let full = self.backoff(attempt, retry_after);
        // What the provider asked for is waited in full (the window still bounds it).
        let floor = retry_after.unwrap_or_default();
        let bits = op.as_uuid().as_u128() ^ (u128::from(attempt) << 64 | u128::from(attempt));
        let mixed = (bits ^ (bits >> 61)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 64;
        // 0..=1023 thousandths of half the wait.
        let cut = u32::try_from(mixed % 1024).unwrap_or(0);
        let jittered = full.saturating_sub(full / 2 * cut / 1024);
        jittered.max(floor)
    }
}

/// How long a call that reaches nothing is retried by default: long enough for a provider's
/// restart or a short outage, short enough that people hear of a real one.
pub const DEFAULT_NOT_SENT_WINDOW: Duration = Duration::from_secs(15 * 60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_is_at_most_a_third_of_the_lease() {
        let config = RunnerConfig::new("r", Duration::from_millis(90));
        assert_eq!(config.heartbeat(), Duration::from_millis(30));
        let slower = config.clone().with_heartbeat(Duration::from_secs(1));
        assert_eq!(slower.heartbeat(), Duration::from_millis(30));
        let faster = config.with_heartbeat(Duration::from_millis(5));
        assert_eq!(faster.heartbeat(), Duration::from_millis(5));
    }

    #[test]
    fn jitter_cuts_at_most_half_never_below_retry_after_and_differs_between_calls() {
        let config = RunnerConfig::new("r", Duration::from_secs(3));
        let ops: Vec<OperationId> = (1..=64_u128)
            .map(|n| OperationId::from_uuid(uuid::Uuid::from_u128(n * 0x1234_5678_9abc)))
            .collect();
        let waits: std::collections::BTreeSet<u128> = ops
            .iter()
            .map(|op| {
                let wait = config.jittered_backoff(*op, 3, None);
                let full = config.backoff(3, None);
                assert!(wait <= full && wait >= full / 2, "{wait:?} of {full:?}");
                wait.as_millis()
            })
            .collect();
        assert!(waits.len() > 8, "jitter spreads calls out: {waits:?}");
        let op = ops[0];
        assert_eq!(
            config.jittered_backoff(op, 2, None),
            config.jittered_backoff(op, 2, None)
        );
        let asked = Duration::from_secs(7);
        assert!(config.jittered_backoff(op, 1, Some(asked)) >= asked);
        let longer = Duration::from_secs(90);
        assert_eq!(
            config.jittered_backoff(op, 1, Some(longer)),
            longer,
            "never cut short"
        );
    }

    #[test]
    fn backoff_doubles_respects_retry_after_and_is_capped() {
        let config = RunnerConfig::new("r", Duration::from_secs(3)).with_not_sent_retries(
            5,
            Duration::from_millis(10),
            Duration::from_millis(50),
        );
        let waits: Vec<u128> = (1..=4)
            .map(|a| config.backoff(a, None).as_millis())
            .collect();
        assert_eq!(waits, vec![10, 20, 40, 50]);
        assert_eq!(
            config.backoff(1, Some(Duration::from_millis(30))),
            Duration::from_millis(30)
        );
        assert_eq!(
            config.backoff(1, Some(Duration::from_secs(9))),
            Duration::from_millis(50)
        );
    }
}
