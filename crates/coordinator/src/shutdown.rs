//! A graceful stop (SIGTERM on `agentroom serve`): no new input is decided from the moment it
//! starts (so no event is accepted and no call reserved or dispatched by this process), calls
//! already running get a bounded grace to finish and record their receipts (fenced on their
//! generation, as always), and the leases of the calls still running after it are released
//! (D3): aborted here, their leases expire at once by the database clock with the generation
//! moved on, so the next recovery of any process classifies them without waiting out the
//! lease — uncertain, reservation held, reconciled, never replayed (D2).
//!
//! A receipt recorded during the grace is not applied to its Room by this process (that
//! would be a new decision, which may reserve the next calls): it is durable evidence, and
//! the next recovery hands it to the Room (D2, D6).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use agentroom_ports::domain::ids::{OperationId, RoomId};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::{Coordinator, CoordinatorError};

/// Whether inputs are still decided, and how many are being decided now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct GateState {
    stopping: bool,
    deciding: usize,
}

/// Lets inputs in until the stop, and counts those in progress so the stop can wait for
/// them (a decision that began before the stop may still dispatch calls).
#[derive(Debug)]
pub(crate) struct Gate {
    state: watch::Sender<GateState>,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            state: watch::channel(GateState::default()).0,
        }
    }
}

/// An input admitted through the [`Gate`]; counted until dropped.
pub(crate) struct Admitted<'a> {
    gate: &'a Gate,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.gate
            .state
            .send_modify(|s| s.deciding = s.deciding.saturating_sub(1));
    }
}

impl Gate {
    /// Admits an input for `room`, or refuses it once the stop began (the Room's actor is
    /// stopping: callers see [`CoordinatorError::ActorStopped`], a 503 at the HTTP edge).
    pub(crate) fn enter(&self, room: &RoomId) -> Result<Admitted<'_>, CoordinatorError> {
        let mut admitted = false;
        self.state.send_if_modified(|s| {
            if s.stopping {
                return false;
            }
            s.deciding += 1;
            admitted = true;
            true
        });
        if admitted {
            Ok(Admitted { gate: self })
        } else {
            Err(CoordinatorError::ActorStopped(room.clone()))
        }
    }

    /// Refuses every input from now on.
    fn close(&self) {
        self.state.send_modify(|s| s.stopping = true);
    }

    /// Whether the stop began.
    pub(crate) fn closed(&self) -> bool {
        self.state.borrow().stopping
    }

    /// Resolves once no admitted input is being decided.
    async fn settled(&self) {
        let mut rx = self.state.subscribe();
        // The sender lives in `self`: the wait cannot fail.
        let _ = rx.wait_for(|s| s.deciding == 0).await;
    }
}

/// A call this process runs: the lease generation it holds, and its task once spawned.
#[derive(Debug)]
struct RunningCall {
    generation: i64,
    task: Option<AbortHandle>,
}

/// The calls this process runs now, by operation: what a stop aborts and releases.
#[derive(Debug, Default)]
pub(crate) struct RunningCalls {
    calls: Mutex<HashMap<OperationId, RunningCall>>,
}

impl RunningCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<OperationId, RunningCall>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `op` starts running under the lease at `generation` (before its task is spawned).
    pub(crate) fn started(&self, op: OperationId, generation: i64) {
        self.lock().insert(
            op,
            RunningCall {
                generation,
                task: None,
            },
        );
    }

    /// The task running `op`, unless it ended already.
    pub(crate) fn attach(&self, op: OperationId, task: AbortHandle) {
        if let Some(call) = self.lock().get_mut(&op) {
            call.task = Some(task);
        }
    }

    /// `op`'s task ended.
    pub(crate) fn ended(&self, op: OperationId) {
        self.lock().remove(&op);
    }

    /// Takes every call still running.
    fn take(&self) -> Vec<(OperationId, RunningCall)> {
        let mut calls: Vec<_> = self.lock().drain().collect();
        calls.sort_by_key(|(op, _)| *op);
        calls
    }
}

/// What a graceful stop did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Whether every call running at the stop ended within the grace.
    pub drained: bool,
    /// Calls still running after the grace, aborted, whose leases were released: the next
    /// recovery (any process) claims them at once.
    pub released: Vec<OperationId>,
    /// Calls aborted after the grace whose lease was no longer this process's to release
    /// (their receipt got written, or the lease was lost): recovery finds them as they are.
    pub fenced: Vec<OperationId>,
    /// Calls whose release failed (the store did not answer): their leases expire on their
    /// own.
    pub failed: Vec<OperationId>,
}

impl Coordinator {
    /// Stops gracefully: from now on no input is decided (every submission is refused with
    /// [`CoordinatorError::ActorStopped`]); decisions in progress finish; the calls running
    /// get up to `grace` to finish and record their receipts; the calls still running then
    /// are aborted and their leases released (D3), so the next recovery classifies them at
    /// once (D2). Call it once, when the host stops.
    #[tracing::instrument(skip(self))]
    pub async fn shutdown(&self, grace: Duration) -> ShutdownReport {
        let shared = &self.shared;
        shared.gate.close();
        let mut in_flight = shared.in_flight.subscribe();
        let drained = tokio::time::timeout(grace, async {
            shared.gate.settled().await;
            // The sender lives in `shared`: the wait cannot fail.
            let _ = in_flight.wait_for(|n| *n == 0).await;
        })
        .await
        .is_ok();
        let mut report = ShutdownReport {
            drained,
            ..ShutdownReport::default()
        };
        let running = shared.running.take();
        if running.is_empty() {
            tracing::info!(drained, "every call ended within the grace");
            return report;
        }
        // Abort first, so no heartbeat of ours extends a lease after its release (and the
        // release moves the generation on, fencing a write already on its way).
        for (_, call) in &running {
            if let Some(task) = &call.task {
                task.abort();
            }
        }
        for (op, call) in running {
            match shared.store.release_lease(op, call.generation).await {
                Ok(true) => {
                    tracing::warn!(%op, generation = call.generation, "still running after the grace: aborted, lease released");
                    report.released.push(op);
                }
                Ok(false) => {
                    tracing::info!(%op, generation = call.generation, "aborted after the grace; its lease was no longer ours");
                    report.fenced.push(op);
                }
                Err(err) => {
                    tracing::warn!(%op, %err, "releasing the lease failed: it expires on its own");
                    report.failed.push(op);
                }
            }
        }
        report
    }

    /// Whether a graceful stop began ([`Coordinator::shutdown`]).
    pub fn stopping(&self) -> bool {
        self.shared.gate.closed()
    }
}
