//! The actor of one Room: it owns the Room as this process last saw it and decides the
//! commands it is sent one at a time, so decisions on a Room are serialized within a process.
//! Across processes the store's compare-and-swap decides: a conflict reloads and decides the
//! same input again (same derived ids), bounded, with jittered backoff; an event accepted
//! before is done (T1).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::state::RoomState;

use agentroom_ports::domain::engine::{
    CallEvent, Decision, Effect, Env, Input, LogEntry, close_out, decide,
};
use agentroom_ports::domain::ids::{DerivedIds, OperationId, RoomId};
use agentroom_ports::{Commit, CommitError, NewContent, Receipt, StoredRoom};
use agentroom_workflows::Leased;
use agentroom_workflows::crash::{self, crash_point};
use tokio::sync::{mpsc, oneshot};

use crate::calls::dispatch;
use crate::ids::{IdSeed, kind_of};
use crate::{Committed, CoordinatorError, Outcome, Shared};

/// When a call outcome still applies.
#[derive(Debug, Clone)]
pub(crate) enum Guard {
    /// Always decide.
    None,
    /// Always decide an event not stored yet, and persist it in the commit that accepts it
    /// (issue 21): the store refuses with `CommitError::EventStored` when its id is stored.
    Persist,
    /// A call event for operation `op`: decided only while the Room holds the operation in a
    /// state the event fits (`CallEvent::fits`), and the operation row marked applied once
    /// the decision settled it. A `receipt` not recorded yet goes into the same commit as the
    /// decision, fenced on its generation (DESIGN.md "A durable call", step 4); it is written
    /// only with a decision.
    Outcome {
        op: OperationId,
        event: Box<CallEvent>,
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

/// The actor's loop: one command at a time. It holds the coordinator only while it decides:
/// the coordinator holds the actor's channel, so a strong hold here would keep both alive
/// forever once every handle to the coordinator is dropped (a leak per coordinator built in a
/// process: tests, the bench, a command). The channel closes with the coordinator and the loop
/// ends.
pub(crate) async fn run(shared: Weak<Shared>, room: RoomId, mut commands: mpsc::Receiver<Command>) {
    let mut cached: Option<Arc<StoredRoom>> = None;
    while let Some(command) = commands.recv().await {
        let Some(shared) = shared.upgrade() else {
            return;
        };
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
        // The Room as this process last stored or read it, for the call sink (T3, C1) to use
        // while the store is still at its revision, without reading the state again.
        if let Some(latest) = &cached {
            shared.remember_latest(&room, latest);
        }
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

/// The content of the contribution `input` carries that its commit keeps, when the Room can
/// keep it (within its policy's bounds, checked first, so nothing of an oversized one is
/// stored): in the same transaction as the decision that names it (issue 21). Content is
/// addressed by its digest, so a retry or a redelivery writes nothing again.
fn content_of(state: &RoomState, input: &Input) -> Vec<NewContent> {
    let Some(draft) = input.contribution_draft() else {
        return Vec::new();
    };
    // An oversized or malformed one is refused by the decision (T2), with nothing stored.
    if draft.check(state.policy().content()).is_err() {
        return Vec::new();
    }
    draft
        .pieces()
        .into_iter()
        .map(|piece| NewContent::new(piece.media_type, piece.bytes.into_owned()))
        // Content the owner redacted stays out of the store, even when a later contribution
        // holds the same bytes: its redaction record answers for it.
        .filter(|content| state.redactions().of_content(content.digest()).is_none())
        .collect()
}

/// Reads the Room's content under `digests` (what a review's evidence is checked against,
/// R7). A store error is the decision's error (it is taken again later), never a missing
/// piece of evidence; content that is absent or not text is simply not supplied.
async fn read_contents(
    shared: &Arc<Shared>,
    room: &RoomId,
    digests: &[ContentDigest],
) -> Result<BTreeMap<ContentDigest, String>, CoordinatorError> {
    let mut contents = BTreeMap::new();
    for digest in digests {
        if let Some(stored) = shared.store.content(room, digest).await?
            && let Ok(text) = String::from_utf8(stored.bytes)
        {
            contents.insert(digest.clone(), text);
        }
    }
    Ok(contents)
}

async fn decide_and_commit(
    shared: &Arc<Shared>,
    room: &RoomId,
    cached: &mut Option<Arc<StoredRoom>>,
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
            None => Arc::new(
                shared
                    .store
                    .load(room)
                    .await?
                    .ok_or_else(|| CoordinatorError::UnknownRoom(room.clone()))?,
            ),
        };
        let now = shared.clock.now();
        let kept = content_of(&current.state, &input);
        let contents = read_contents(shared, room, &input.content_needed(&current.state)).await?;
        // What the input asks about objectives no longer in the live state: their records.
        let mut records = Vec::new();
        for key in input.archive_needed(&current.state) {
            records.extend(shared.store.records_by(room, &key).await?);
        }
        // B8: the pool the Room draws on, as it is now (the store checks it again when it
        // commits); a pool that cannot be found admits nothing.
        let pool = match current.state.pool() {
            Some(id) => shared.store.load_pool(id).await?.map(|pool| pool.ledger),
            None => None,
        };
        let decide_now = || -> Result<Decision, CoordinatorError> {
            let mut ids = DerivedIds::new(seed.namespace());
            let mut env = Env {
                now,
                ids: &mut ids,
                catalog: &*shared.catalog,
                contents: &contents,
                served: shared.served.as_ref(),
                pool: pool.as_ref(),
                archive: &records,
            };
            let mut decision = decide(&current.state, input.clone(), &mut env)?;
            // Issue 21: what the decision leaves closed and settled leaves the live state, in
            // this commit, as its record.
            close_out(&mut decision);
            Ok(decision)
        };
        let (decision, applied, receipt) = match &guard {
            Guard::None | Guard::Persist => (Some(decide_now()?), None, None),
            Guard::Outcome { op, event, receipt } => {
                let op = *op;
                let settles = event.settles();
                let state = current.state.operation(op).map(|o| o.state());
                if state.is_some_and(|state| event.fits(state)) {
                    let mut decision = decide_now()?;
                    // C1: what the call's prompt left out goes into the decision log.
                    if let Some((_, receipt)) = receipt.as_deref()
                        && !receipt.omitted.is_empty()
                    {
                        let objective = current.state.operation(op).and_then(|o| o.objective());
                        decision.log.push(LogEntry::context_omitted(
                            now,
                            objective,
                            op,
                            &receipt.omitted,
                        ));
                    }
                    let mark = (settles && decision.settles(op)).then_some(op);
                    let receipt = receipt
                        .as_deref()
                        .map(|(generation, receipt)| (op, *generation, receipt.clone()));
                    (Some(decision), mark, receipt)
                } else if !settles || state.is_some() {
                    // Decided before (or still open in a state this outcome does not fit,
                    // e.g. not yet decided uncertain): nothing to write now.
                    *cached = Some(current);
                    return Ok(Outcome::AlreadyDone);
                } else if receipt.is_some() {
                    // The Room settled it before, and this receipt is not recorded: the call
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
        // The event is persisted only with the history row that accepts it (`commit.event`,
        // which every decision of an accepted event carries): never stored unaccepted here.
        if let (Guard::Persist, Input::EventAccepted(event)) = (&guard, &input)
            && commit.event == Some(event.id)
        {
            commit.new_event = Some(event);
        }
        let persisting = commit.new_event.is_some();
        commit.applied.extend(applied);
        commit.contents = kept;
        let commit_had_receipt = receipt.is_some();
        commit.receipts.extend(receipt);
        // An operator input is decided once per Room: the store refuses a second commit.
        commit.input_id = seed.input();
        match shared.store.commit(room, current.revision, commit).await {
            Ok(revision) => {
                let Some(decision) = decision else {
                    *cached = Some(Arc::new(StoredRoom {
                        state: Arc::unwrap_or_clone(current).state,
                        revision,
                    }));
                    return Ok(Outcome::AlreadyDone);
                };
                if commit_had_receipt {
                    // The receipt and the decision it settles, in one commit.
                    crash_point(crash::AFTER_SETTLE);
                }
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
                *cached = Some(Arc::new(StoredRoom {
                    state: decision.state,
                    revision,
                }));
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
            Err(CommitError::PoolRefused { pool, reason, .. }) => {
                // Another Room drawing on the pool committed since this decision read it:
                // decide again from the pool as it is now (the Room did not move).
                tracing::info!(attempt, %pool, %reason, "the pool moved: deciding again");
                *cached = Some(current);
                let salt = u128::from(now.as_millis().unsigned_abs()) ^ seed.namespace().as_u128();
                tokio::time::sleep(backoff(shared.config.backoff, attempt, salt)).await;
            }
            // An event this commit was to persist was accepted before, so it is stored: the
            // caller persists it the checked way, which refuses other content under its id.
            Err(CommitError::AlreadyAccepted { event, .. }) if persisting => {
                return Err(CoordinatorError::Commit(CommitError::EventStored {
                    room: room.clone(),
                    event,
                }));
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
