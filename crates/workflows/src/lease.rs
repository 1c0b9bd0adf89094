//! Holding a lease while a call runs: the process's one heartbeat ([`Beater`]) extends it at
//! most a third of the lease apart, fenced on the generation; the abort fires when the
//! heartbeat says fenced or cancel, or when no heartbeat got through for a whole lease (D3).
//! Also the runner's call loop: calls that reached nothing are retried with jittered backoff
//! within a window.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentroom_ports::domain::engine::CallRequest;
use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::{CallContext, Receipt, ReceiptWrite, StoreError, WorkflowStore};
use tokio::time::{Instant, sleep, sleep_until};

use crate::abort::{Abort, AbortReason, AbortTrigger};
use crate::beat::{Answer, Beater, Registered};
use crate::config::RunnerConfig;
use crate::provider::{CallOutcome, Provider};

/// Keeps one lease alive through the process's [`Beater`] and fires the abort.
struct LeaseKeeper {
    op: OperationId,
    generation: i64,
    lease: Duration,
    grace: Duration,
    trigger: AbortTrigger,
    /// The lease as registered with the beater; `None` once fenced or lost.
    registered: Option<Registered>,
    extended_at: Instant,
}

impl LeaseKeeper {
    fn new(beater: &Arc<Beater>, op: OperationId, generation: i64, config: &RunnerConfig) -> Self {
        Self {
            op,
            generation,
            lease: config.lease(),
            grace: config.abort_grace(),
            trigger: Abort::new().0,
            registered: Some(beater.join(op, generation)),
            extended_at: Instant::now(),
        }
    }

    fn signal(&self) -> Abort {
        self.trigger.signal()
    }

    fn reason(&self) -> Option<AbortReason> {
        self.trigger.reason()
    }

    /// A cancelled call keeps its lease while it stops; a fenced or lost one has none.
    fn beating(&self) -> bool {
        self.registered.is_some()
    }

    /// Runs `fut` while its lease is kept. `None` if the abort fired and `fut` did not finish
    /// within the grace period (it is dropped).
    async fn guard<F: Future>(&mut self, fut: F) -> Option<F::Output> {
        tokio::pin!(fut);
        let mut give_up = self.reason().map(|_| Instant::now() + self.grace);
        loop {
            let give_up_at = give_up.unwrap_or_else(Instant::now);
            let lost_at = self.extended_at + self.lease;
            let beating = self.beating();
            let answered = async {
                match self.registered.as_mut() {
                    Some(registered) => registered.answers.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                out = &mut fut => return Some(out),
                () = sleep_until(give_up_at), if give_up.is_some() => return None,
                open = answered, if beating => {
                    if open {
                        self.heard();
                    } else {
                        // The beater let go of this lease: nothing extends it any more.
                        self.lost("the heartbeat stopped");
                    }
                }
                () = sleep_until(lost_at), if beating => self.lost("no heartbeat for a whole lease"),
            }
            if give_up.is_none() && self.reason().is_some() {
                give_up = Some(Instant::now() + self.grace);
            }
        }
    }

    /// What the last heartbeat said about this lease.
    fn heard(&mut self) {
        let Some(registered) = self.registered.as_mut() else {
            return;
        };
        let answer = registered.answers.borrow_and_update().clone();
        match answer {
            Answer::Pending => {}
            Answer::Extended { at, cancel } => {
                self.extended_at = self.extended_at.max(at);
                if cancel && self.reason().is_none() {
                    tracing::info!(op = %self.op, "cancel requested: aborting the call");
                    self.trigger.abort(AbortReason::Cancelled);
                }
            }
            Answer::Fenced => {
                tracing::warn!(op = %self.op, generation = self.generation, "fenced: aborting the call");
                self.registered = None;
                self.trigger.abort(AbortReason::Fenced);
            }
            Answer::Missed(why) => tracing::warn!(op = %self.op, why, "heartbeat failed"),
        }
    }

    /// The lease may be lost: the call is aborted and its lease no longer kept.
    fn lost(&mut self, why: &str) {
        tracing::warn!(op = %self.op, why, "the lease may be lost: aborting the call");
        self.registered = None;
        self.trigger.abort(AbortReason::LeaseLost);
    }
}

/// How a call ended, after retries, as far as the runner knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Execution {
    /// The provider returned (possibly after a cancel: the result is late, not lost, D4).
    Returned(Receipt),
    /// The heartbeat said fenced: whatever came back is dropped.
    Fenced,
    /// It may have run: no receipt.
    Uncertain(String),
    /// Nothing reached the provider for the whole waiting window (or the call was stopped
    /// while it waited).
    Unreachable(String),
    /// The provider refused it before running it: not retried.
    Refused(String),
}

/// Calls the provider under the lease at `generation`. A call that reached nothing is retried
/// with jittered exponential backoff for the configured window, under the same operation id
/// and lease; `on_wait` hears once, at the first such failure, why it waits.
#[tracing::instrument(skip_all, fields(op = %request.op, generation))]
pub(crate) async fn execute<P>(
    beater: &Arc<Beater>,
    provider: &P,
    config: &RunnerConfig,
    generation: i64,
    request: &CallRequest,
    context: &CallContext,
    on_wait: &(dyn Fn(String) + Send + Sync),
) -> Execution
where
    P: Provider + ?Sized,
{
    let mut keeper = LeaseKeeper::new(beater, request.op, generation, config);
    let started = Instant::now();
    let mut attempt = 0_u32;
    loop {
        let outcome = keeper
            .guard(provider.call(request, context, keeper.signal()))
            .await;
        let aborted = keeper.reason();
        let (retry_after, reason) = match (outcome, aborted) {
            (_, Some(AbortReason::Fenced)) => return Execution::Fenced,
            (None, reason) => {
                let reason = reason.map_or("unknown", AbortReason::as_str);
                return Execution::Uncertain(format!(
                    "the provider did not stop after its abort ({reason}) and was dropped"
                ));
            }
            (Some(CallOutcome::Returned(receipt)), _) => return Execution::Returned(receipt),
            (Some(CallOutcome::Uncertain { reason }), _) => return Execution::Uncertain(reason),
            (Some(CallOutcome::Refused { reason }), _) => return Execution::Refused(reason),
            (Some(CallOutcome::Aborted), reason) => {
                let reason = reason.map_or("unasked", AbortReason::as_str);
                return Execution::Uncertain(format!("the call was aborted ({reason})"));
            }
            (
                Some(CallOutcome::NotSent {
                    retry_after,
                    reason,
                }),
                _,
            ) => (retry_after, reason),
        };
        attempt = attempt.saturating_add(1);
        if let Some(aborted) = aborted {
            return Execution::Unreachable(format!("{reason}; not retried ({})", aborted.as_str()));
        }
        let waited = started.elapsed();
        if attempt > config.not_sent_retries() || waited >= config.not_sent_window() {
            return Execution::Unreachable(format!(
                "{reason} (gave up after {attempt} attempts over {}s)",
                waited.as_secs()
            ));
        }
        if attempt == 1 {
            on_wait(reason.clone());
        }
        let wait = config
            .jittered_backoff(request.op, attempt, retry_after)
            .min(config.not_sent_window().saturating_sub(waited))
            .max(Duration::from_millis(1));
        tracing::info!(
            attempt,
            ?wait,
            reason,
            "nothing reached the provider: retrying"
        );
        let signal = keeper.signal();
        keeper
            .guard(async {
                tokio::select! {
                    () = sleep(wait) => {}
                    _ = signal.aborted() => {}
                }
            })
            .await;
        match keeper.reason() {
            Some(AbortReason::Fenced) => return Execution::Fenced,
            Some(other) => {
                return Execution::Unreachable(format!(
                    "{reason}; not retried ({})",
                    other.as_str()
                ));
            }
            None => {}
        }
    }
}

/// Retries a store call up to the configured bound, with backoff.
pub(crate) async fn retrying<T, F, Fut>(
    config: &RunnerConfig,
    what: &str,
    mut call: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut attempt = 0_u32;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(err) => {
                attempt = attempt.saturating_add(1);
                if attempt > config.store_retries() {
                    return Err(err);
                }
                tracing::warn!(what, attempt, %err, "store call failed: retrying");
                sleep(config.store_backoff(attempt)).await;
            }
        }
    }
}

/// Writes `receipt` fenced on `generation`, retrying store failures. A retry that finds the
/// receipt written reads it back: if it is this one at this generation, it was recorded.
pub(crate) async fn write_receipt<W: WorkflowStore + ?Sized>(
    store: &W,
    config: &RunnerConfig,
    op: OperationId,
    generation: i64,
    receipt: &Receipt,
) -> Result<ReceiptWrite, StoreError> {
    let mut tries = 0_u32;
    let written = retrying(config, "record_receipt", || {
        tries += 1;
        store.record_receipt(op, generation, receipt)
    })
    .await?;
    if written == ReceiptWrite::Fenced && tries > 1 {
        let mine = store.operation(op).await?.is_some_and(|record| {
            record.generation == generation && record.receipt.as_ref() == Some(receipt)
        });
        if mine {
            return Ok(ReceiptWrite::Recorded);
        }
    }
    Ok(written)
}

/// Marks the operation uncertain fenced on `generation`, retrying store failures (a retry
/// that finds it uncertain at this generation counts as marked).
pub(crate) async fn mark_uncertain<W: WorkflowStore + ?Sized>(
    store: &W,
    config: &RunnerConfig,
    op: OperationId,
    generation: i64,
) -> Result<bool, StoreError> {
    let mut tries = 0_u32;
    let marked = retrying(config, "mark_uncertain", || {
        tries += 1;
        store.mark_uncertain(op, generation)
    })
    .await?;
    if !marked && tries > 1 {
        return Ok(store.operation(op).await?.is_some_and(|record| {
            record.generation == generation
                && record.status == agentroom_ports::OperationStatus::Uncertain
        }));
    }
    Ok(marked)
}
