//! How the runner runs: lease length, heartbeat cadence (at most a third of the lease), retry
//! and recovery bounds.

use std::time::Duration;

use agentroom_ports::LeaseGrant;

/// The runner's settings. The heartbeat interval never exceeds a third of the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerConfig {
    runner: String,
    lease: Duration,
    heartbeat: Duration,
    abort_grace: Duration,
    not_sent_retries: u32,
    backoff: Duration,
    backoff_max: Duration,
    store_retries: u32,
    max_recovery_attempts: u32,
    claim_batch: usize,
}

impl RunnerConfig {
    /// Defaults for runner `runner` holding leases of `lease`: heartbeat every lease/3, three
    /// retries of an unsent call, three recovery attempts before a dead letter.
    pub fn new(runner: impl Into<String>, lease: Duration) -> Self {
        // Stores grant at most MAX_LEASE; heartbeats must be timed on what they grant.
        let lease = lease.min(agentroom_ports::MAX_LEASE);
        let heartbeat = lease / 3;
        Self {
            runner: runner.into(),
            lease,
            heartbeat,
            abort_grace: heartbeat,
            not_sent_retries: 3,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            store_retries: 3,
            max_recovery_attempts: 3,
            claim_batch: 64,
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

    /// The wait before retry `attempt` (1-based): `base · 2^(attempt-1)`, at least
    /// `retry_after`, at most the maximum.
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let factor = 1_u32 << attempt.saturating_sub(1).min(16);
        self.backoff
            .saturating_mul(factor)
            .max(retry_after.unwrap_or_default())
            .min(self.backoff_max)
    }
}

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
