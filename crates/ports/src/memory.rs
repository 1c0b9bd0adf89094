//! In-memory fakes of the stores (feature `test-util`): the reference the conformance suite
//! checks itself against, and a quick store for unit tests of the crates above. Never used
//! by a binary or an end-to-end test. Leases are timed by this process's monotonic clock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agentroom_domain::archive::{ObjectiveRecord, RecordKey};
use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::engine::Notification;
use agentroom_domain::event::Event;
use agentroom_domain::ids::{
    EventId, InputId, NotificationId, ObjectiveId, OperationId, PoolId, RoomId, Timestamp,
};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_domain::state::RoomState;
use async_trait::async_trait;
use serde_json::Value;

use crate::artifacts::{ArtifactStore, Put, StoredContent, verified};
use crate::delta::Delta;
use crate::notify::{Outbox, OutboxItem};
use crate::pools::{PoolChange, PoolChangeError, PoolLogEntry, PoolStore, StoredPool};
use crate::rooms::{
    Commit, CommitError, Delivered, EventAppend, HistoryEntry, OutboxPosition, Revision, RoomStore,
    StoreError, StoredRoom, refuse_in_group,
};
use crate::workflows::{
    ClaimedOperation, Heartbeat, LeaseGrant, OperationFilter, OperationRecord, OperationStatus,
    Receipt, ReceiptWrite, Resolution, WorkflowStore,
};

/// Every store in memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// Its bearer tokens (`memory_tokens`), so it is every store the coordinator needs.
    pub(crate) tokens: crate::memory_tokens::MemoryTokens,
}

#[derive(Debug, Default, Clone)]
struct Inner {
    rooms: BTreeMap<RoomId, RoomRow>,
    events: BTreeMap<(RoomId, EventId), Event>,
    /// Events in the order they were persisted.
    event_order: Vec<(RoomId, EventId)>,
    operations: BTreeMap<OperationId, OpRow>,
    order: u64,
    ledger: BTreeMap<RoomId, Vec<LedgerEntry>>,
    outbox: Vec<(RoomId, Notification, u32, bool)>,
    /// Delivered notifications in the order they were marked delivered (position = index + 1).
    deliveries: Vec<(RoomId, Notification)>,
    /// Content by Room and address.
    contents: BTreeMap<(RoomId, ContentDigest), StoredContent>,
    /// Budget pools (B8).
    pools: BTreeMap<PoolId, PoolRow>,
}

#[derive(Debug, Clone)]
struct PoolRow {
    revision: i64,
    ledger: BudgetLedger,
    log: Vec<PoolLogEntry>,
}

#[derive(Debug, Clone)]
struct RoomRow {
    revision: Revision,
    first: Value,
    history: Vec<Delta>,
    state: RoomState,
    /// Events whose acceptance was committed (T1).
    accepted: BTreeSet<EventId>,
    /// Operator inputs decided, with the revision that decided each.
    inputs: BTreeMap<InputId, Revision>,
    /// What each commit after the creation decided (revision 2 first).
    decided: Vec<HistoryEntry>,
    /// When the Room was created.
    created: Timestamp,
    /// Closed objectives' records, in the order they left the live state.
    records: Vec<ObjectiveRecord>,
}

#[derive(Debug, Clone)]
struct OpRow {
    order: u64,
    record: OperationRecord,
    expires: Option<Instant>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The operations `wanted` keeps, oldest first, each refreshed to now.
    fn listed(&self, wanted: impl Fn(&OperationRecord) -> bool) -> Vec<OperationRecord> {
        let mut inner = self.lock();
        let now = Instant::now();
        let mut rows: Vec<&mut OpRow> = inner
            .operations
            .values_mut()
            .filter(|row| wanted(&row.record))
            .collect();
        rows.sort_by_key(|row| row.order);
        rows.into_iter()
            .map(|row| {
                refresh(row, now);
                row.record.clone()
            })
            .collect()
    }
}

/// One commit on the store's rows (the lock held): every check first, then every write.
fn commit_in(
    inner: &mut Inner,
    room: &RoomId,
    expected: Revision,
    commit: Commit<'_>,
) -> Result<Revision, CommitError> {
    let now = Instant::now();
    let Some(row) = inner.rooms.get(room) else {
        return Err(CommitError::UnknownRoom(room.clone()));
    };
    if row.revision != expected {
        return Err(CommitError::Conflict {
            room: room.clone(),
            expected,
            actual: row.revision,
        });
    }
    if let Some(event) = commit.event
        && row.accepted.contains(&event)
    {
        return Err(CommitError::AlreadyAccepted {
            room: room.clone(),
            event,
        });
    }
    if let Some(input) = commit.input_id
        && row.inputs.contains_key(&input)
    {
        return Err(CommitError::AlreadyDecided {
            room: room.clone(),
            input,
        });
    }
    if let Some(event) = commit.new_event
        && inner.events.keys().any(|(_, id)| *id == event.id)
    {
        return Err(CommitError::EventStored {
            room: room.clone(),
            event: event.id,
        });
    }
    for (op, generation, _) in &commit.receipts {
        let writable = inner.operations.get(op).is_some_and(|o| {
            o.record.room == *room
                && o.record.generation == *generation
                && o.record.receipt.is_none()
                && o.record.status == OperationStatus::InFlight
        });
        if !writable {
            return Err(CommitError::Fenced {
                op: *op,
                generation: *generation,
            });
        }
    }
    // B8: the pool the Room draws on follows its ledger entries, or nothing is written
    // (decided here, written after every fallible step below).
    let pooled = commit
        .state
        .pool()
        .filter(|_| agentroom_domain::pool::moves_pool(&commit.ledger));
    let mut moved_pool = None;
    if let Some(pool) = pooled {
        let refused = |reason: String| CommitError::PoolRefused {
            room: room.clone(),
            pool: pool.clone(),
            reason,
        };
        match inner.pools.get(pool) {
            Some(row) => {
                let mut ledger = row.ledger.clone();
                agentroom_domain::pool::follow(&mut ledger, &commit.ledger)
                    .map_err(|e| refused(e.to_string()))?;
                moved_pool = Some((pool.clone(), ledger));
            }
            // A pool that is gone holds nothing: only a reservation needs it.
            None if agentroom_domain::pool::reserves(&commit.ledger) => {
                return Err(refused(format!("there is no pool {pool}")));
            }
            None => {}
        }
    }
    let delta = Delta::between(&to_json(commit.previous)?, &to_json(commit.state)?);
    let revision = expected.next();
    let scrubs = commit.scrubs.clone();
    if let Some(row) = inner.rooms.get_mut(room) {
        row.history.push(delta);
        if !scrubs.texts.is_empty() {
            crate::scrub::scrub_memory_texts(&mut row.first, &scrubs.texts);
            for delta in &mut row.history {
                let mut value = serde_json::to_value(&*delta)
                    .map_err(|e| StoreError::database("scrubbing a redacted memory text", e))?;
                if crate::scrub::scrub_memory_texts(&mut value, &scrubs.texts) {
                    *delta = serde_json::from_value(value)
                        .map_err(|e| StoreError::database("scrubbing a redacted memory text", e))?;
                }
            }
        }
        row.revision = revision;
        row.state = commit.state.clone();
        row.records.extend(commit.archived.iter().cloned());
        row.accepted.extend(commit.event);
        if let Some(input) = commit.input_id {
            row.inputs.insert(input, revision);
        }
        row.decided.push(HistoryEntry {
            revision,
            input: commit.input.to_owned(),
            event: commit.event,
            input_id: commit.input_id,
            log: commit.log.to_vec(),
            at: commit.at,
        });
    }
    if let Some(event) = commit.new_event {
        let key = (event.room.clone(), event.id);
        inner.events.insert(key.clone(), event.clone());
        inner.event_order.push(key);
    }
    for content in &commit.contents {
        inner
            .contents
            .entry((room.clone(), content.digest().clone()))
            .or_insert_with(|| StoredContent {
                digest: content.digest().clone(),
                media_type: content.media_type().to_owned(),
                bytes: content.bytes().to_vec(),
            });
    }
    for digest in &scrubs.contents {
        inner.contents.remove(&(room.clone(), digest.clone()));
    }
    if let Some((pool, mut ledger)) = moved_pool
        && let Some(row) = inner.pools.get_mut(&pool)
    {
        let appended = ledger.take_journal();
        if !appended.is_empty() {
            row.revision += 1;
            row.ledger = ledger;
            for entry in appended {
                let seq = i64::try_from(row.log.len()).unwrap_or(i64::MAX) + 1;
                row.log.push(PoolLogEntry {
                    seq,
                    room: Some(room.clone()),
                    entry,
                    at: commit.at,
                });
            }
        }
    }
    for new in commit.operations {
        let op = new.request.op;
        if inner.operations.contains_key(&op) {
            continue;
        }
        inner.order += 1;
        let order = inner.order;
        let (owner, expires, generation) = match new.lease {
            Some(lease) => (Some(lease.owner), Some(now + lease.duration), 1),
            None => (None, None, 0),
        };
        inner.operations.insert(
            op,
            OpRow {
                order,
                expires,
                record: OperationRecord {
                    room: new.room,
                    request: new.request,
                    status: OperationStatus::InFlight,
                    generation,
                    lease_owner: owner,
                    lease_expired: expires.is_none(),
                    cancel_requested: false,
                    receipt: None,
                    recovery_attempts: 0,
                    dead_letter_reason: None,
                    resolution: None,
                },
            },
        );
    }
    for (op, _, receipt) in commit.receipts {
        if let Some(row) = inner.operations.get_mut(&op) {
            row.record.receipt = Some(receipt);
            row.record.status = OperationStatus::Receipted;
        }
    }
    for op in commit.applied {
        if let Some(row) = inner.operations.get_mut(&op) {
            row.record.status = OperationStatus::Applied;
        }
    }
    for op in commit.cancellations {
        if let Some(row) = inner.operations.get_mut(&op) {
            row.record.cancel_requested = true;
        }
    }
    inner
        .ledger
        .entry(room.clone())
        .or_default()
        .extend(commit.ledger);
    for notification in commit.notifications {
        if !inner
            .outbox
            .iter()
            .any(|(_, n, _, _)| n.id == notification.id)
        {
            inner.outbox.push((room.clone(), notification, 0, false));
        }
    }
    Ok(revision)
}

fn to_json(state: &RoomState) -> Result<Value, StoreError> {
    serde_json::to_value(state).map_err(|e| StoreError::corrupt("a Room state", e))
}

/// Extends the lease of `op` when `generation` is current and it is in flight.
fn extend(
    inner: &mut Inner,
    op: OperationId,
    generation: i64,
    duration: Duration,
    now: Instant,
) -> Heartbeat {
    match inner.operations.get_mut(&op) {
        Some(row)
            if row.record.generation == generation
                && row.record.status == OperationStatus::InFlight =>
        {
            row.expires = Some(now + duration);
            refresh(row, now);
            Heartbeat::Extended {
                cancel: row.record.cancel_requested,
            }
        }
        _ => Heartbeat::Fenced,
    }
}

fn refresh(row: &mut OpRow, now: Instant) {
    row.record.lease_expired = row.expires.is_none_or(|at| at <= now);
}

#[async_trait]
impl RoomStore for MemoryStore {
    async fn create(&self, state: &RoomState, at: Timestamp) -> Result<Revision, StoreError> {
        let mut inner = self.lock();
        let room = state.room().clone();
        if inner.rooms.contains_key(&room) {
            return Err(StoreError::RoomExists(room));
        }
        let opening = state
            .ledger()
            .opening()
            .ok_or_else(|| StoreError::NotFresh(room.clone()))?;
        let first = to_json(state)?;
        inner.ledger.insert(room.clone(), vec![opening]);
        inner.rooms.insert(
            room,
            RoomRow {
                revision: Revision::FIRST,
                first,
                history: Vec::new(),
                state: state.clone(),
                accepted: BTreeSet::new(),
                inputs: BTreeMap::new(),
                decided: Vec::new(),
                created: at,
                records: Vec::new(),
            },
        );
        Ok(Revision::FIRST)
    }

    async fn load(&self, room: &RoomId) -> Result<Option<StoredRoom>, StoreError> {
        Ok(self.lock().rooms.get(room).map(|row| StoredRoom {
            state: row.state.clone(),
            revision: row.revision,
        }))
    }

    async fn commit(
        &self,
        room: &RoomId,
        expected: Revision,
        commit: Commit<'_>,
    ) -> Result<Revision, CommitError> {
        commit_in(&mut self.lock(), room, expected, commit)
    }

    async fn commit_group(
        &self,
        room: &RoomId,
        expected: Revision,
        commits: Vec<Commit<'_>>,
    ) -> Result<Vec<Revision>, CommitError> {
        refuse_in_group(&commits)?;
        let mut inner = self.lock();
        // All or nothing: the store as it was comes back when one of them is refused.
        let before = inner.clone();
        let mut revisions = Vec::with_capacity(commits.len());
        let mut at = expected;
        for commit in commits {
            match commit_in(&mut inner, room, at, commit) {
                Ok(revision) => {
                    revisions.push(revision);
                    at = revision;
                }
                Err(refused) => {
                    *inner = before;
                    return Err(refused);
                }
            }
        }
        Ok(revisions)
    }

    async fn state_at(
        &self,
        room: &RoomId,
        revision: Revision,
    ) -> Result<Option<RoomState>, StoreError> {
        let inner = self.lock();
        let Some(row) = inner.rooms.get(room) else {
            return Ok(None);
        };
        if revision < Revision::FIRST || revision > row.revision {
            return Ok(None);
        }
        let mut value = row.first.clone();
        let steps = usize::try_from(revision.0 - 1).unwrap_or(usize::MAX);
        for delta in row.history.iter().take(steps) {
            delta
                .apply(&mut value)
                .map_err(|e| StoreError::corrupt(format!("room {room} at {revision}"), e))?;
        }
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| StoreError::corrupt(format!("room {room} at {revision}"), e))
    }

    async fn ledger(&self, room: &RoomId) -> Result<Vec<LedgerEntry>, StoreError> {
        Ok(self.lock().ledger.get(room).cloned().unwrap_or_default())
    }

    async fn append_event(&self, event: &Event, _at: Timestamp) -> Result<EventAppend, StoreError> {
        let mut inner = self.lock();
        let key = (event.room.clone(), event.id);
        match inner.events.get(&key) {
            Some(stored) if stored == event => Ok(EventAppend::Existed),
            Some(_) => Err(StoreError::EventMismatch(event.id)),
            None => {
                if inner.events.keys().any(|(_, id)| *id == event.id) {
                    return Err(StoreError::EventMismatch(event.id));
                }
                inner.events.insert(key.clone(), event.clone());
                inner.event_order.push(key);
                Ok(EventAppend::Inserted)
            }
        }
    }

    async fn event(&self, room: &RoomId, id: EventId) -> Result<Option<Event>, StoreError> {
        Ok(self.lock().events.get(&(room.clone(), id)).cloned())
    }

    async fn unaccepted_events(
        &self,
        room: &RoomId,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let inner = self.lock();
        let accepted = inner.rooms.get(room).map(|r| &r.accepted);
        Ok(inner
            .event_order
            .iter()
            .filter(|(r, id)| r == room && !accepted.is_some_and(|a| a.contains(id)))
            .filter_map(|key| inner.events.get(key).cloned())
            .take(limit)
            .collect())
    }

    async fn input_decided(
        &self,
        room: &RoomId,
        input: InputId,
    ) -> Result<Option<Revision>, StoreError> {
        Ok(self
            .lock()
            .rooms
            .get(room)
            .and_then(|row| row.inputs.get(&input).copied()))
    }

    async fn history(
        &self,
        room: &RoomId,
        after: Revision,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        let inner = self.lock();
        let Some(row) = inner.rooms.get(room) else {
            return Ok(Vec::new());
        };
        let created = HistoryEntry {
            revision: Revision::FIRST,
            input: "create".to_owned(),
            event: None,
            input_id: None,
            log: Vec::new(),
            at: row.created,
        };
        Ok(std::iter::once(&created)
            .chain(&row.decided)
            .filter(|entry| entry.revision > after)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn delivered(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Delivered>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .deliveries
            .iter()
            .zip(1_i64..)
            .filter(|((r, _), position)| r == room && *position > after)
            .take(limit)
            .map(|((_, notification), position)| Delivered {
                position,
                notification: notification.clone(),
            })
            .collect())
    }

    async fn outbox_position(
        &self,
        room: &RoomId,
        id: NotificationId,
    ) -> Result<Option<OutboxPosition>, StoreError> {
        let inner = self.lock();
        if let Some(position) = inner
            .deliveries
            .iter()
            .zip(1_i64..)
            .find(|((r, n), _)| r == room && n.id == id)
            .map(|(_, position)| position)
        {
            return Ok(Some(OutboxPosition::Delivered(position)));
        }
        Ok(inner
            .outbox
            .iter()
            .any(|(r, n, _, _)| r == room && n.id == id)
            .then_some(OutboxPosition::Undelivered))
    }

    async fn rooms(&self, after: Option<&RoomId>, limit: usize) -> Result<Vec<RoomId>, StoreError> {
        Ok(self
            .lock()
            .rooms
            .keys()
            .filter(|room| after.is_none_or(|after| room.as_str() > after.as_str()))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn objective_record(
        &self,
        room: &RoomId,
        objective: ObjectiveId,
    ) -> Result<Option<ObjectiveRecord>, StoreError> {
        Ok(self
            .lock()
            .rooms
            .get(room)
            .and_then(|row| row.records.iter().find(|r| r.id() == objective).cloned()))
    }

    async fn objective_records(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, ObjectiveRecord)>, StoreError> {
        let inner = self.lock();
        let Some(row) = inner.rooms.get(room) else {
            return Ok(Vec::new());
        };
        Ok((1_i64..)
            .zip(row.records.iter())
            .filter(|(position, _)| *position > after)
            .take(limit)
            .map(|(position, record)| (position, record.clone()))
            .collect())
    }

    async fn records_by(
        &self,
        room: &RoomId,
        key: &RecordKey,
    ) -> Result<Vec<ObjectiveRecord>, StoreError> {
        let inner = self.lock();
        let Some(row) = inner.rooms.get(room) else {
            return Ok(Vec::new());
        };
        Ok(row
            .records
            .iter()
            .filter(|r| RecordKey::of(r).contains(key))
            .cloned()
            .collect())
    }
}

#[async_trait]
impl WorkflowStore for MemoryStore {
    async fn claim_expired(
        &self,
        lease: LeaseGrant,
        limit: usize,
    ) -> Result<Vec<ClaimedOperation>, StoreError> {
        let mut inner = self.lock();
        let now = Instant::now();
        let mut rows: Vec<&mut OpRow> = inner
            .operations
            .values_mut()
            .filter(|row| {
                row.record.status == OperationStatus::InFlight
                    && row.record.receipt.is_none()
                    && row.expires.is_none_or(|at| at <= now)
            })
            .collect();
        rows.sort_by_key(|row| row.order);
        let mut claimed = Vec::new();
        for row in rows.into_iter().take(limit) {
            row.record.generation += 1;
            row.record.recovery_attempts += 1;
            row.record.lease_owner = Some(lease.owner.clone());
            row.expires = Some(now + lease.duration);
            refresh(row, now);
            claimed.push(ClaimedOperation {
                generation: row.record.generation,
                record: row.record.clone(),
            });
        }
        Ok(claimed)
    }

    async fn heartbeat(
        &self,
        op: OperationId,
        generation: i64,
        duration: Duration,
    ) -> Result<Heartbeat, StoreError> {
        let mut inner = self.lock();
        Ok(extend(&mut inner, op, generation, duration, Instant::now()))
    }

    /// Every lease under one lock: one atomic change, as a database's one transaction.
    async fn heartbeat_all(
        &self,
        leases: &[(OperationId, i64)],
        duration: Duration,
    ) -> Result<Vec<Heartbeat>, StoreError> {
        let mut inner = self.lock();
        let now = Instant::now();
        Ok(leases
            .iter()
            .map(|(op, generation)| extend(&mut inner, *op, *generation, duration, now))
            .collect())
    }

    async fn record_receipt(
        &self,
        op: OperationId,
        generation: i64,
        receipt: &Receipt,
    ) -> Result<ReceiptWrite, StoreError> {
        let mut inner = self.lock();
        match inner.operations.get_mut(&op) {
            Some(row)
                if row.record.generation == generation
                    && row.record.receipt.is_none()
                    && row.record.status == OperationStatus::InFlight =>
            {
                row.record.receipt = Some(receipt.clone());
                row.record.status = OperationStatus::Receipted;
                Ok(ReceiptWrite::Recorded)
            }
            _ => Ok(ReceiptWrite::Fenced),
        }
    }

    async fn mark_uncertain(&self, op: OperationId, generation: i64) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        match inner.operations.get_mut(&op) {
            Some(row)
                if row.record.generation == generation
                    && row.record.receipt.is_none()
                    && row.record.status == OperationStatus::InFlight =>
            {
                row.record.status = OperationStatus::Uncertain;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn count_recovery_attempt(&self, op: OperationId) -> Result<Option<u32>, StoreError> {
        let mut inner = self.lock();
        match inner.operations.get_mut(&op) {
            Some(row) if row.record.status == OperationStatus::Uncertain => {
                row.record.recovery_attempts = row.record.recovery_attempts.saturating_add(1);
                Ok(Some(row.record.recovery_attempts))
            }
            _ => Ok(None),
        }
    }

    async fn dead_letter(&self, op: OperationId, reason: &str) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        match inner.operations.get_mut(&op) {
            Some(row)
                if matches!(
                    row.record.status,
                    OperationStatus::InFlight | OperationStatus::Uncertain
                ) =>
            {
                row.record.status = OperationStatus::DeadLetter;
                row.record.dead_letter_reason = Some(reason.to_owned());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn resolve(&self, op: OperationId, resolution: &Resolution) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        match inner.operations.get_mut(&op) {
            Some(row)
                if matches!(
                    row.record.status,
                    OperationStatus::Uncertain | OperationStatus::DeadLetter
                ) =>
            {
                row.record.status = OperationStatus::Resolved;
                row.record.resolution = Some(resolution.clone());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn operation(&self, op: OperationId) -> Result<Option<OperationRecord>, StoreError> {
        let mut inner = self.lock();
        let now = Instant::now();
        Ok(inner.operations.get_mut(&op).map(|row| {
            refresh(row, now);
            row.record.clone()
        }))
    }

    async fn operations(
        &self,
        filter: OperationFilter,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        Ok(self.listed(|record| match filter {
            OperationFilter::Open => !matches!(
                record.status,
                OperationStatus::Applied | OperationStatus::Resolved
            ),
            OperationFilter::Status(status) => record.status == status,
        }))
    }

    async fn room_operations(
        &self,
        room: &RoomId,
        status: Option<OperationStatus>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        Ok(self.listed(|record| &record.room == room && status.is_none_or(|s| record.status == s)))
    }

    async fn release_lease(&self, op: OperationId, generation: i64) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        let now = Instant::now();
        match inner.operations.get_mut(&op) {
            Some(row)
                if row.record.generation == generation
                    && row.record.receipt.is_none()
                    && row.record.status == OperationStatus::InFlight =>
            {
                row.record.generation += 1;
                row.record.lease_owner = None;
                row.expires = Some(now);
                refresh(row, now);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

#[async_trait]
impl ArtifactStore for MemoryStore {
    async fn put_content(
        &self,
        room: &RoomId,
        media_type: &str,
        bytes: &[u8],
        _at: Timestamp,
    ) -> Result<(ContentDigest, Put), StoreError> {
        let digest = ContentDigest::of(bytes);
        let mut inner = self.lock();
        let key = (room.clone(), digest.clone());
        if inner.contents.contains_key(&key) {
            return Ok((digest, Put::Present));
        }
        inner.contents.insert(
            key,
            StoredContent {
                digest: digest.clone(),
                media_type: media_type.to_owned(),
                bytes: bytes.to_vec(),
            },
        );
        Ok((digest, Put::Stored))
    }

    async fn content(
        &self,
        room: &RoomId,
        digest: &ContentDigest,
    ) -> Result<Option<StoredContent>, StoreError> {
        let stored = self
            .lock()
            .contents
            .get(&(room.clone(), digest.clone()))
            .cloned();
        stored.map(|stored| verified(digest, stored)).transpose()
    }
}

#[async_trait]
impl Outbox for MemoryStore {
    async fn undelivered(&self, limit: usize) -> Result<Vec<OutboxItem>, StoreError> {
        Ok(self
            .lock()
            .outbox
            .iter()
            .filter(|(_, _, _, delivered)| !delivered)
            .take(limit)
            .map(|(room, notification, attempts, _)| OutboxItem {
                room: room.clone(),
                notification: notification.clone(),
                attempts: *attempts,
            })
            .collect())
    }

    async fn mark_delivered(&self, id: NotificationId) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let mut newly = None;
        for item in &mut inner.outbox {
            if item.1.id == id && !item.3 {
                item.3 = true;
                newly = Some((item.0.clone(), item.1.clone()));
            }
        }
        inner.deliveries.extend(newly);
        Ok(())
    }

    async fn mark_attempt(&self, id: NotificationId) -> Result<(), StoreError> {
        for item in &mut self.lock().outbox {
            if item.1.id == id {
                item.2 = item.2.saturating_add(1);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl PoolStore for MemoryStore {
    async fn create_pool(
        &self,
        id: &PoolId,
        ledger: &BudgetLedger,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if inner.pools.contains_key(id) {
            return Err(StoreError::PoolExists(id.clone()));
        }
        let log = ledger
            .journal()
            .iter()
            .zip(1..)
            .map(|(entry, seq)| PoolLogEntry {
                seq,
                room: None,
                entry: entry.clone(),
                at,
            })
            .collect();
        let mut ledger = ledger.clone();
        ledger.take_journal();
        inner.pools.insert(
            id.clone(),
            PoolRow {
                revision: 1,
                ledger,
                log,
            },
        );
        Ok(())
    }

    async fn load_pool(&self, id: &PoolId) -> Result<Option<StoredPool>, StoreError> {
        Ok(self.lock().pools.get(id).map(|row| StoredPool {
            id: id.clone(),
            ledger: row.ledger.clone(),
            revision: row.revision,
        }))
    }

    async fn change_pool(
        &self,
        id: &PoolId,
        change: PoolChange<'_>,
        at: Timestamp,
    ) -> Result<StoredPool, PoolChangeError> {
        let mut inner = self.lock();
        let row = inner
            .pools
            .get_mut(id)
            .ok_or_else(|| PoolChangeError::UnknownPool(id.clone()))?;
        let mut ledger = row.ledger.clone();
        ledger.take_journal();
        change(&mut ledger).map_err(|refusal| PoolChangeError::Refused {
            pool: id.clone(),
            refusal,
        })?;
        let entries = ledger.take_journal();
        row.revision += 1;
        row.ledger = ledger;
        for entry in entries {
            let seq = i64::try_from(row.log.len()).unwrap_or(i64::MAX) + 1;
            row.log.push(PoolLogEntry {
                seq,
                room: None,
                entry,
                at,
            });
        }
        Ok(StoredPool {
            id: id.clone(),
            ledger: row.ledger.clone(),
            revision: row.revision,
        })
    }

    async fn pool_log(&self, id: &PoolId) -> Result<Vec<PoolLogEntry>, StoreError> {
        Ok(self
            .lock()
            .pools
            .get(id)
            .map(|row| row.log.clone())
            .unwrap_or_default())
    }

    async fn pools(&self) -> Result<Vec<PoolId>, StoreError> {
        Ok(self.lock().pools.keys().cloned().collect())
    }
}
