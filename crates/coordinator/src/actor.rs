//! The actor of one Room: it owns the Room as this process last saw it and decides the
//! commands it is sent one at a time, so decisions on a Room are serialized within a process.
//! Across processes the store's compare-and-swap decides: a conflict reloads and decides the
//! same input again (same derived ids), bounded, with jittered backoff; an event accepted
//! before is done (T1).

use std::sync::Arc;
use std::time::Duration;

use agentroom_ports::domain::engine::{Decision, Effect, Env, Input, decide};
use agentroom_ports::domain::ids::{DerivedIds, OperationId, RoomId};
use agentroom_ports::domain::state::OperationState;
use agentroom_ports::{Commit, CommitError, Receipt, StoredRoom};
use agentroom_workflows::crash::{self, crash_point};
use agentroom_workflows::{Leased, Runner, settled_by};
use tokio::sync::{mpsc, oneshot};

use crate::control::SettleAborted;
use crate::ids::{IdSeed, kind_of};
use crate::owner::Owner;
use crate::sink::Authorized;
use crate::{Committed, CoordinatorError, Outcome, Shared};

/// When a call outcome still applies.
#[derive(Debug, Clone)]
pub(crate) enum Guard {
    /// Always decide.
    None,
    /// Decide only while operation `op` is in a state `when` accepts; `applied` marks the
    /// operation row applied once the Room has settled it. A `receipt` not recorded yet goes
    /// into the same commit as the decision, fenced on its generation (DESIGN.md "A durable
    /// call", step 4); it is written only with a decision.
    Outcome {
        op: OperationId,
        when: fn(OperationState) -> bool,
        applied: bool,
        receipt: Option<Box<(i64, Receipt)>>,
    },
}

/// One input to decide, and where the answer goes.
pub(crate) struct Command {
    pub(crate) input: Input,
    pub(crate) seed: IdSeed,
    pub(crate) guard: Guard,
    pub(crate) reply: oneshot::Sender<Result<Outcome, CoordinatorError>>,
}

/// The actor's loop: one command at a time.
pub(crate) async fn run(shared: Arc<Shared>, room: RoomId, mut commands: mpsc::Receiver<Command>) {
    let mut cached: Option<StoredRoom> = None;
    while let Some(command) = commands.recv().await {
        tracing::debug!(room = %room, input = kind_of(&command.input), "deciding");
        let result = decide_and_commit(
            &shared,
            &room,
            &mut cached,
            command.input,
            command.seed,
            command.guard,
        )
        .await;
        // The caller may have gone (a runner task cancelled at shutdown): nothing to tell.
        let _ = command.reply.send(result);
    }
}

/// A jittered wait before retry `attempt`: `base · 2^attempt`, plus up to as much again,
/// from the clock's low bits (no randomness source needed to break lock-step retries).
fn backoff(base: Duration, attempt: u32, salt: u128) -> Duration {
    let wait = base.saturating_mul(1 << attempt.min(6));
    let jitter = u32::try_from(salt % 1_000).unwrap_or(0);
    wait + wait.mul_f64(f64::from(jitter) / 1_000.0)
}

async fn decide_and_commit(
    shared: &Arc<Shared>,
    room: &RoomId,
    cached: &mut Option<StoredRoom>,
    input: Input,
    seed: IdSeed,
    guard: Guard,
) -> Result<Outcome, CoordinatorError> {
    let kind = kind_of(&input);
    let grant = shared.config.runner.lease_grant();
    let retries = shared.config.conflict_retries;
    for attempt in 0..=retries {
        let current = match cached.take() {
            Some(current) => current,
            None => shared
                .store
                .load(room)
                .await?
                .ok_or_else(|| CoordinatorError::UnknownRoom(room.clone()))?,
        };
        let now = shared.clock.now();
        let decide_now = || -> Result<Decision, CoordinatorError> {
            let mut ids = DerivedIds::new(seed.namespace());
            let mut env = Env {
                now,
                ids: &mut ids,
                catalog: &*shared.catalog,
            };
            Ok(decide(&current.state, input.clone(), &mut env)?)
        };
        let (decision, applied, receipt) = match &guard {
            Guard::None => (Some(decide_now()?), None, None),
            Guard::Outcome {
                op,
                when,
                applied,
                receipt,
            } => {
                let (op, applied) = (*op, *applied);
                let state = current.state.operation(op).map(|o| o.state());
                if state.is_some_and(*when) {
                    let decision = decide_now()?;
                    let mark = (applied && settled_by(&decision, op)).then_some(op);
                    let receipt = receipt
                        .as_deref()
                        .map(|(generation, receipt)| (op, *generation, receipt.clone()));
                    (Some(decision), mark, receipt)
                } else if !applied || state.is_some() {
                    // Decided before (or still open in a state this outcome does not fit,
                    // e.g. not yet decided uncertain): nothing to write now.
                    *cached = Some(current);
                    return Ok(Outcome::AlreadyDone);
                } else if receipt.is_some() {
                    // The Room settled it before, and this receipt is not recorded: the runner
                    // records it alone first (fenced), then delivers it, which marks it.
                    *cached = Some(current);
                    return Ok(Outcome::AlreadyDone);
                } else {
                    // The Room settled it before; the row only lacks its applied mark.
                    (None, Some(op), None)
                }
            }
        };
        let mut commit = match &decision {
            Some(decision) => {
                Commit::decided(room, &current.state, decision, now, kind, Some(&grant))
            }
            None => Commit::state(&current.state, &current.state, now, kind),
        };
        commit.applied.extend(applied);
        commit.receipts.extend(receipt);
        // An operator input is decided once per Room: the store refuses a second commit.
        commit.input_id = seed.input();
        match shared.store.commit(room, current.revision, commit).await {
            Ok(revision) => {
                let Some(decision) = decision else {
                    *cached = Some(StoredRoom {
                        state: current.state,
                        revision,
                    });
                    return Ok(Outcome::AlreadyDone);
                };
                let calls = reserved(room, &decision);
                if !calls.is_empty() {
                    crash_point(crash::AFTER_RESERVE);
                }
                let ops = calls.iter().map(Leased::op).collect();
                shared.committed(&Committed {
                    room: room.clone(),
                    revision,
                    input: kind,
                    log: decision.log.clone(),
                    effects: decision.effects.clone(),
                });
                *cached = Some(StoredRoom {
                    state: decision.state,
                    revision,
                });
                for call in calls {
                    dispatch(shared, call);
                }
                return Ok(Outcome::Decided {
                    revision,
                    log: decision.log,
                    calls: ops,
                });
            }
            Err(CommitError::Conflict { actual, .. }) => {
                tracing::info!(attempt, %actual, "the room moved: reloading and deciding again");
                let salt = u128::from(now.as_millis().unsigned_abs()) ^ seed.namespace().as_u128();
                tokio::time::sleep(backoff(shared.config.backoff, attempt, salt)).await;
            }
            Err(CommitError::AlreadyAccepted { event, .. }) => {
                tracing::info!(%event, "accepted before (T1): nothing to do");
                return Ok(Outcome::AlreadyDone);
            }
            Err(err) => return Err(CoordinatorError::Commit(err)),
        }
    }
    Err(CoordinatorError::Conflicted {
        room: room.clone(),
        attempts: retries.saturating_add(1),
    })
}

/// The calls `decision` reserved, leased to this process in the commit (transaction 1).
fn reserved(room: &RoomId, decision: &Decision) -> Vec<Leased> {
    decision
        .effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::ReserveAndCall(request) => Some(Leased::created(room.clone(), request.clone())),
            _ => None,
        })
        .collect()
}

/// Runs one leased call as its own task: the runner calls the provider (behind the T3 sink
/// check), records the receipt fenced on the generation and hands it back to the actor.
pub(crate) fn dispatch(shared: &Arc<Shared>, call: Leased) {
    shared.in_flight.send_modify(|n| *n += 1);
    shared.running.started(call.op(), call.generation);
    let provider = Arc::new(Authorized::new(
        call.room.clone(),
        Arc::clone(&shared.store),
        Arc::clone(&shared.provider),
    ));
    let runner = Runner::new(
        Arc::clone(&shared.store),
        provider,
        Arc::new(SettleAborted::new(
            Arc::new(Owner::new(Arc::clone(shared))),
            Arc::clone(&shared.reconciler),
        )),
        shared.config.runner.clone(),
    );
    let op = call.op();
    let task = tokio::spawn({
        let shared = Arc::clone(shared);
        async move {
            match runner.run(call).await {
                Ok(outcome) => tracing::debug!(%op, ?outcome, "call ended"),
                Err(err) => tracing::warn!(%op, %err, "call failed; recovery will find it"),
            }
            shared.running.ended(op);
            shared.in_flight.send_modify(|n| *n = n.saturating_sub(1));
        }
    });
    // A graceful stop aborts the calls still running after its grace (`shutdown`).
    shared.running.attach(op, task.abort_handle());
}
