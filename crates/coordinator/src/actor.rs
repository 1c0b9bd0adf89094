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

use agentroom_ports::domain::archive::{ObjectiveRecord, RecordKey};
use agentroom_ports::domain::engine::{
    CallEvent, Decision, Effect, Env, Input, LogEntry, close_out, decide,
};
use agentroom_ports::domain::ids::{DerivedIds, OperationId, RoomId};
use agentroom_ports::{Commit, CommitError, NewContent, Receipt, Revision, StoreError, StoredRoom};
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
        // Issue 21: the commands that came while the last commit was made are decided
        // together and committed in one transaction.
        let mut group = vec![command];
        while group.len() < GROUP_LIMIT {
            match commands.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        if group.len() == 1 {
            decide_each(&shared, &room, &mut cached, group).await;
        } else {
            decide_group(&shared, &room, &mut cached, group).await;
        }
        // The Room as this process last stored or read it, for the call sink (T3, C1) to use
        // while the store is still at its revision, without reading the state again.
        if let Some(latest) = &cached {
            shared.remember_latest(&room, latest);
        }
    }
}

/// At most this many commands decided together and committed in one transaction.
const GROUP_LIMIT: usize = 32;

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
/// R7), from `pending` (content an earlier decision of the same group keeps) or the store. A
/// store error is the decision's error (it is taken again later), never a missing piece of
/// evidence; content that is absent or not text is simply not supplied.
async fn read_contents(
    shared: &Arc<Shared>,
    room: &RoomId,
    digests: &[ContentDigest],
    pending: &Pending,
) -> Result<BTreeMap<ContentDigest, String>, CoordinatorError> {
    let mut contents = BTreeMap::new();
    for digest in digests {
        let bytes = match pending.contents.iter().find(|c| c.digest() == digest) {
            Some(kept) => Some(kept.bytes().to_vec()),
            None => shared
                .store
                .content(room, digest)
                .await?
                .map(|stored| stored.bytes),
        };
        if let Some(bytes) = bytes
            && let Ok(text) = String::from_utf8(bytes)
        {
            contents.insert(digest.clone(), text);
        }
    }
    Ok(contents)
}

/// What the decisions of a group decided before this one keep and have not committed yet:
/// read by the next ones as the store would answer once they are (none for a single input).
#[derive(Default)]
struct Pending {
    contents: Vec<NewContent>,
    records: Vec<ObjectiveRecord>,
}

/// What deciding one input against a state came to.
enum Prepared {
    /// Nothing to write: the answer.
    Answered(Outcome),
    /// A commit to make.
    Write(Box<Write>),
}

/// A decision to commit (or only an operation's applied mark, `decision` none).
struct Write {
    decision: Option<Decision>,
    applied: Option<OperationId>,
    receipt: Option<(OperationId, i64, Receipt)>,
    kept: Vec<NewContent>,
    now: agentroom_ports::domain::ids::Timestamp,
}

/// Decides `input` against `state` (the Room as stored, or as an earlier decision of the same
/// group leaves it), reading what the decision needs.
async fn prepare(
    shared: &Arc<Shared>,
    room: &RoomId,
    state: &RoomState,
    input: &Input,
    seed: IdSeed,
    guard: &Guard,
    pending: &Pending,
) -> Result<Prepared, CoordinatorError> {
    let now = shared.clock.now();
    let kept = content_of(state, input);
    let contents = read_contents(shared, room, &input.content_needed(state), pending).await?;
    // What the input asks about objectives no longer in the live state: their records.
    let mut records = Vec::new();
    for key in input.archive_needed(state) {
        records.extend(shared.store.records_by(room, &key).await?);
        records.extend(
            pending
                .records
                .iter()
                .filter(|r| RecordKey::of(r).contains(&key))
                .cloned(),
        );
    }
    // B8: the pool the Room draws on, as it is now (the store checks it again when it
    // commits); a pool that cannot be found admits nothing.
    let pool = match state.pool() {
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
        let mut decision = decide(state, input.clone(), &mut env)?;
        // Issue 21: what the decision leaves closed and settled leaves the live state, in
        // this commit, as its record.
        close_out(&mut decision);
        Ok(decision)
    };
    let write = |decision, applied, receipt| {
        Prepared::Write(Box::new(Write {
            decision,
            applied,
            receipt,
            kept,
            now,
        }))
    };
    Ok(match guard {
        Guard::None | Guard::Persist => write(Some(decide_now()?), None, None),
        Guard::Outcome { op, event, receipt } => {
            let op = *op;
            let settles = event.settles();
            let operation = state.operation(op).map(|o| o.state());
            if operation.is_some_and(|operation| event.fits(operation)) {
                let mut decision = decide_now()?;
                // C1: what the call's prompt left out goes into the decision log.
                if let Some((_, receipt)) = receipt.as_deref()
                    && !receipt.omitted.is_empty()
                {
                    let objective = state.operation(op).and_then(|o| o.objective());
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
                write(Some(decision), mark, receipt)
            } else if !settles || operation.is_some() || receipt.is_some() {
                // Decided before (or still open in a state this outcome does not fit, e.g.
                // not yet decided uncertain): nothing to write now. Or the Room settled it
                // before and this receipt is not recorded: the call records it alone first
                // (fenced), then delivers it, which marks it.
                Prepared::Answered(Outcome::AlreadyDone)
            } else {
                // The Room settled it before; the row only lacks its applied mark.
                write(None, Some(op), None)
            }
        }
    })
}

/// What `write` commits on `previous` for the command (`input`, `seed`, `guard`); its kept
/// content goes in separately (`kept`, taken out of the write).
#[allow(clippy::too_many_arguments)]
fn commit_of<'a>(
    room: &RoomId,
    previous: &'a RoomState,
    write: &'a Write,
    kept: Vec<NewContent>,
    input: &'a Input,
    seed: IdSeed,
    guard: &Guard,
    grant: &agentroom_ports::LeaseGrant,
) -> Commit<'a> {
    let kind = kind_of(input);
    let mut commit = match &write.decision {
        Some(decision) => Commit::decided(room, previous, decision, write.now, kind, Some(grant)),
        None => Commit::state(previous, previous, write.now, kind),
    };
    // The event is persisted only with the history row that accepts it (`commit.event`,
    // which every decision of an accepted event carries): never stored unaccepted here.
    if let (Guard::Persist, Input::EventAccepted(event)) = (guard, input)
        && commit.event == Some(event.id)
    {
        commit.new_event = Some(event);
    }
    commit.applied.extend(write.applied);
    commit.contents = kept;
    commit.receipts.extend(write.receipt.clone());
    // An operator input is decided once per Room: the store refuses a second commit.
    commit.input_id = seed.input();
    commit
}

/// What follows a write's commit at `revision`: the crash points of the steps it made
/// durable, the watchers told, the calls it reserved dispatched (B1: only now). Answers the
/// outcome and the state the Room is in.
fn committed(
    shared: &Arc<Shared>,
    room: &RoomId,
    revision: Revision,
    write: Write,
    kind: &'static str,
) -> (Outcome, Option<RoomState>) {
    let Some(decision) = write.decision else {
        return (Outcome::AlreadyDone, None);
    };
    if write.receipt.is_some() {
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
    for call in calls {
        dispatch(shared, call);
    }
    let outcome = Outcome::Decided {
        revision,
        log: decision.log,
        calls: ops,
    };
    (outcome, Some(decision.state))
}

async fn load(shared: &Arc<Shared>, room: &RoomId) -> Result<Arc<StoredRoom>, CoordinatorError> {
    Ok(Arc::new(shared.store.load(room).await?.ok_or_else(
        || CoordinatorError::UnknownRoom(room.clone()),
    )?))
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
            None => load(shared, room).await?,
        };
        let prepared = prepare(
            shared,
            room,
            &current.state,
            &input,
            seed,
            &guard,
            &Pending::default(),
        )
        .await?;
        let mut write = match prepared {
            Prepared::Answered(outcome) => {
                *cached = Some(current);
                return Ok(outcome);
            }
            Prepared::Write(write) => *write,
        };
        let now = write.now;
        let kept = std::mem::take(&mut write.kept);
        let commit = commit_of(
            room,
            &current.state,
            &write,
            kept,
            &input,
            seed,
            &guard,
            &grant,
        );
        let persisting = commit.new_event.is_some();
        match shared.store.commit(room, current.revision, commit).await {
            Ok(revision) => {
                let (outcome, state) = committed(shared, room, revision, write, kind);
                let state = match state {
                    Some(state) => state,
                    None => Arc::unwrap_or_clone(current).state,
                };
                *cached = Some(Arc::new(StoredRoom { state, revision }));
                return Ok(outcome);
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

/// Where a command of a group stands once every command was decided.
enum Slot {
    /// Answered without a write (or refused): the answer.
    Answered(Result<Outcome, CoordinatorError>),
    /// Its write is a member of the group's commit (in the order of the writes).
    Member,
}

/// Decides `commands` (waiting for the Room together) in sequence, each against the state
/// the one before leaves, and commits their writes together (issue 21, group decisions):
/// callers on one Room wait for one commit instead of one each, and none reloads after
/// losing a compare-and-swap to another caller of this process. Each write is its own
/// revision and history row; the calls they reserve are dispatched only after the commit
/// (B1). When the group's commit is refused (nothing written: another process moved the
/// Room, an event accepted before, a receipt fenced, a pool refused), each command is
/// decided again on its own, as if it had come alone; when the store failed (nothing or
/// everything written), each write's caller is told, as a single commit's would be.
async fn decide_group(
    shared: &Arc<Shared>,
    room: &RoomId,
    cached: &mut Option<Arc<StoredRoom>>,
    commands: Vec<Command>,
) {
    let current = match cached.take() {
        Some(current) => current,
        // Each command learns the failure as it would alone.
        None => match load(shared, room).await {
            Ok(current) => current,
            Err(_) => return decide_each(shared, room, cached, commands).await,
        },
    };
    // B8: a pooled Room's decisions each read the pool as the one before moved it; they are
    // decided and committed one at a time.
    if current.state.pool().is_some() {
        *cached = Some(current);
        return decide_each(shared, room, cached, commands).await;
    }
    let mut slots = Vec::with_capacity(commands.len());
    let mut writes: Vec<(usize, Write)> = Vec::new();
    let mut pending = Pending::default();
    for (index, command) in commands.iter().enumerate() {
        let state = writes
            .iter()
            .rev()
            .find_map(|(_, w)| w.decision.as_ref().map(|d| &d.state))
            .unwrap_or(&current.state);
        tracing::debug!(room = %room, input = kind_of(&command.input), "deciding in a group");
        match prepare(
            shared,
            room,
            state,
            &command.input,
            command.seed,
            &command.guard,
            &pending,
        )
        .await
        {
            Ok(Prepared::Answered(outcome)) => slots.push(Slot::Answered(Ok(outcome))),
            Ok(Prepared::Write(write)) => {
                let write = *write;
                pending.contents.extend(write.kept.iter().cloned());
                if let Some(decision) = &write.decision {
                    pending.records.extend(decision.archived.iter().cloned());
                }
                slots.push(Slot::Member);
                writes.push((index, write));
            }
            Err(error) => slots.push(Slot::Answered(Err(error))),
        }
    }
    let grant = shared.config.runner.lease_grant();
    let result = {
        let mut commits = Vec::with_capacity(writes.len());
        let mut previous = &current.state;
        let kept: Vec<Vec<NewContent>> = writes
            .iter_mut()
            .map(|(_, w)| std::mem::take(&mut w.kept))
            .collect();
        for ((index, write), kept) in writes.iter().zip(kept) {
            let command = &commands[*index];
            commits.push(commit_of(
                room,
                previous,
                write,
                kept,
                &command.input,
                command.seed,
                &command.guard,
                &grant,
            ));
            if let Some(decision) = &write.decision {
                previous = &decision.state;
            }
        }
        if commits.is_empty() {
            Ok(Vec::new())
        } else if agentroom_ports::refuse_in_group(&commits).is_err() {
            // A redaction (or a pool move) is committed alone.
            Err(None)
        } else if commits.len() == 1 {
            // One write among inputs answered without one: its commit alone, in one
            // statement, without a transaction around it.
            let mut commits = commits;
            match commits.pop() {
                Some(commit) => shared
                    .store
                    .commit(room, current.revision, commit)
                    .await
                    .map(|revision| vec![revision])
                    .map_err(Some),
                None => Ok(Vec::new()),
            }
        } else {
            crash_point(crash::BEFORE_GROUP);
            shared
                .store
                .commit_group(room, current.revision, commits)
                .await
                .map_err(Some)
        }
    };
    match result {
        Ok(revisions) => {
            if !revisions.is_empty() {
                crash_point(crash::AFTER_GROUP);
            }
            let mut state = None;
            let mut revision = current.revision;
            let mut outcomes = Vec::with_capacity(writes.len());
            for ((index, write), at) in writes.into_iter().zip(revisions) {
                let kind = kind_of(&commands[index].input);
                let (outcome, decided) = committed(shared, room, at, write, kind);
                state = decided.or(state);
                revision = at;
                outcomes.push(outcome);
            }
            let mut outcomes = outcomes.into_iter();
            let state = match state {
                Some(state) => state,
                None => Arc::unwrap_or_clone(current).state,
            };
            *cached = Some(Arc::new(StoredRoom { state, revision }));
            for (command, slot) in commands.into_iter().zip(slots) {
                let answer =
                    match slot {
                        Slot::Answered(answer) => answer,
                        // Members come in the order of their writes, one outcome each.
                        Slot::Member => outcomes.next().ok_or(CoordinatorError::Store(
                            StoreError::inconsistent("a group's commit answered fewer revisions"),
                        )),
                    };
                let _ = command.reply.send(answer);
            }
        }
        Err(Some(CommitError::Store(error))) => {
            // Nothing or everything was written: each write's caller learns it as a single
            // commit's would (the first the store's own error); the others decided nothing
            // and are decided again, on the Room as the store now has it.
            tracing::warn!(%error, "a group commit failed");
            let message = error.to_string();
            let mut error = Some(error);
            let mut again = Vec::new();
            for (command, slot) in commands.into_iter().zip(slots) {
                match slot {
                    Slot::Member => {
                        let error = error.take().unwrap_or_else(|| {
                            StoreError::database("committing a group of decisions", message.clone())
                        });
                        let failed = CoordinatorError::Commit(CommitError::Store(error));
                        let _ = command.reply.send(Err(failed));
                    }
                    Slot::Answered(_) => again.push(command),
                }
            }
            decide_each(shared, room, cached, again).await;
        }
        Err(refused) => {
            if let Some(refused) = refused {
                tracing::info!(%refused, "a group commit was refused: deciding each input alone");
            }
            decide_each(shared, room, cached, commands).await;
        }
    }
}

/// Decides and commits `commands` one at a time, in order.
async fn decide_each(
    shared: &Arc<Shared>,
    room: &RoomId,
    cached: &mut Option<Arc<StoredRoom>>,
    commands: Vec<Command>,
) {
    for command in commands {
        let result = decide_and_commit(
            shared,
            room,
            cached,
            command.input,
            command.seed,
            command.guard,
        )
        .await;
        let _ = command.reply.send(result);
    }
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
