//! The loops a long-running host (`agentroom serve`) runs around the coordinator: on every
//! tick, for each Room it coordinates, accept the events persisted since (T1: resolved by id
//! from the store, whoever persisted them: another process, `agentroom event post`, the REST
//! API), deliver the outbox (T5) and, every few ticks, run recovery again (D2), so that calls
//! another process left behind when it died are classified once their leases expire. Several
//! processes may run these loops on one database: acceptance is committed once per event and
//! every decision with compare-and-swap, so no event is accepted twice and no task dispatched
//! twice (D1, B7).
//!
//! The loops stop when the stop signal fires, between two passes; the calls in flight are
//! [`Coordinator::shutdown`]'s (a grace, then their leases released).

use std::future::Future;
use std::time::Duration;

use agentroom_ports::Clock;
use agentroom_ports::Reconciler;
use agentroom_ports::domain::catalog::CapabilityCatalog;
use agentroom_ports::domain::ids::RoomId;
use agentroom_workflows::Provider;

use crate::{Coordinator, CoordinatorError, Store};

/// How often the loops pass.
#[derive(Debug, Clone)]
pub struct BackgroundConfig {
    poll: Duration,
    recover_every: u32,
}

impl BackgroundConfig {
    /// A pass every `poll`; recovery on every `recover_every`-th pass (at least every pass).
    pub fn new(poll: Duration, recover_every: u32) -> Self {
        Self {
            poll,
            recover_every: recover_every.max(1),
        }
    }

    /// The time between two passes.
    pub fn poll(&self) -> Duration {
        self.poll
    }
}

impl Default for BackgroundConfig {
    /// A pass every 200 ms, recovery every 10th pass (about every 2 s).
    fn default() -> Self {
        Self::new(Duration::from_millis(200), 10)
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Events accepted.
    pub accepted: usize,
    /// Notifications delivered.
    pub delivered: usize,
}

impl<S, P, R, K, C> Coordinator<S, P, R, K, C>
where
    S: Store,
    P: Provider + 'static,
    R: Reconciler + 'static,
    K: Clock + 'static,
    C: CapabilityCatalog + Send + Sync + 'static,
{
    /// One pass: accept the pending events of each of `rooms`, then deliver the outbox. A
    /// Room that fails is logged and the others still pass; the first error is returned.
    pub async fn pass(&self, rooms: &[RoomId]) -> Result<Pass, CoordinatorError> {
        let mut pass = Pass::default();
        let mut first = None;
        for room in rooms {
            match self.accept_pending(room).await {
                Ok(n) => pass.accepted += n,
                Err(err) => {
                    tracing::warn!(%room, %err, "accepting pending events failed");
                    first.get_or_insert(err);
                }
            }
        }
        match self.deliver_notifications().await {
            Ok(n) => pass.delivered = n,
            Err(err) => {
                tracing::warn!(%err, "delivering the outbox failed");
                first.get_or_insert(err);
            }
        }
        match first {
            Some(err) => Err(err),
            None => Ok(pass),
        }
    }

    /// Runs [`Coordinator::pass`] every `config.poll()` over `rooms`, with recovery every
    /// `recover_every` passes, until `stop` resolves. Errors of a pass are logged and the next
    /// pass tries again (a database that restarts comes back). When `stop` fires the loop
    /// returns after its pass; the calls running in this process are left to
    /// [`Coordinator::shutdown`], which gives them a grace and releases the leases of those
    /// still running, so the next recovery finds them at once (D2, D3). Without it they keep
    /// running while the runtime lives.
    pub async fn run_background(
        &self,
        rooms: &[RoomId],
        config: &BackgroundConfig,
        stop: impl Future<Output = ()>,
    ) {
        let mut stop = std::pin::pin!(stop);
        let mut tick: u32 = 0;
        loop {
            if tick > 0 && tick.is_multiple_of(config.recover_every) {
                match self.recover().await {
                    Ok(report) if report != Default::default() => {
                        tracing::info!(?report, "recovery pass");
                    }
                    Ok(_) => {}
                    Err(err) => tracing::warn!(%err, "recovery pass failed"),
                }
            }
            match self.pass(rooms).await {
                Ok(pass) if pass != Pass::default() => tracing::debug!(?pass, "pass"),
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "pass failed; trying again"),
            }
            tick = tick.wrapping_add(1);
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(config.poll) => {}
            }
        }
    }
}
