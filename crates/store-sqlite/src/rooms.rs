//! `RoomStore`, `WorkflowStore` and `Outbox` on SQLite: the tables of
//! `migrations/sqlite/0002`. A commit is one `BEGIN IMMEDIATE` transaction (D1, B1, B7, T5);
//! leases are timed by the database's clock and every write of a running operation is fenced
//! on its lease generation (D2, D3).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentroom_domain::archive::ObjectiveRecord;
use agentroom_domain::engine::Notification;
use agentroom_domain::event::Event;
use agentroom_domain::ids::{
    EventId, InputId, NotificationId, ObjectiveId, OperationId, RoomId, Timestamp,
};
use agentroom_domain::ledger::LedgerEntry;
use agentroom_domain::redaction::Scrubs;
use agentroom_domain::state::RoomState;
use agentroom_ports::history::{self, Rebuilt, RoomHistory};
use agentroom_ports::scrub::scrub_memory_json;
use agentroom_ports::{
    ClaimedOperation, Commit, CommitError, Delivered, EventAppend, Heartbeat, HistoryEntry,
    LeaseGrant, OperationFilter, OperationRecord, OperationStatus, Outbox, OutboxItem,
    OutboxPosition, Receipt, ReceiptWrite, RecordKey, Resolution, Revision, RoomStore, StoreError,
    StoredRoom, WorkflowStore,
};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Durability;
use crate::connections::{Connections, OpenError};

/// Now, in milliseconds since the Unix epoch, by the database's clock (leases, D3).
macro_rules! now_ms {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}

/// The columns an [`OperationRecord`] is read from, in the order [`operation_from_row`]
/// reads them.
macro_rules! operation_columns {
    () => {
        concat!(
            "op_key, room_id, request, status, lease_generation, lease_owner, \
             (lease_expires_at IS NULL OR lease_expires_at <= ",
            now_ms!(),
            ") AS lease_expired, cancel_requested, receipt, recovery_attempts, \
             dead_letter_reason, resolution"
        )
    };
}

const CAS_SQL: &str = "UPDATE rooms SET revision = revision + 1, updated_ms = ?3 \
     WHERE room_id = ?1 AND revision = ?2";

const HISTORY_SQL: &str = "INSERT INTO room_history \
     (room_id, revision, input, event_id, delta, log, at_ms, input_id) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

const SNAPSHOT_SQL: &str =
    "INSERT INTO room_snapshots (room_id, revision, state) VALUES (?1, ?2, ?3)";

/// Content a commit keeps, once per Room and address (migration 0007).
const CONTENT_SQL: &str = "INSERT INTO room_contents (room_id, digest, media_type, bytes, size, \
     created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (room_id, digest) DO NOTHING";

const LEDGER_SQL: &str = "INSERT INTO ledger_entries (room_id, seq, entry, revision) \
     VALUES (?1, coalesce((SELECT max(seq) FROM ledger_entries WHERE room_id = ?1), 0) + 1, \
             ?2, ?3)";

const NEW_OPERATION_SQL: &str = concat!(
    "INSERT INTO operations (op_id, room_id, request, status, lease_generation, lease_owner, \
     lease_expires_at, created_ms, updated_ms) \
     VALUES (?1, ?2, ?3, 'in_flight', ?4, ?5, \
             CASE WHEN ?6 IS NULL THEN NULL ELSE ",
    now_ms!(),
    " + ?6 END, ",
    now_ms!(),
    ", ",
    now_ms!(),
    ") ON CONFLICT (op_id) DO NOTHING"
);

/// A receipt is written once, only by the current lease generation, only on an operation
/// still in flight.
const RECEIPT_SQL: &str = concat!(
    "UPDATE operations SET receipt = ?3, status = 'receipted', updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND lease_generation = ?2 AND status = 'in_flight' \
       AND receipt IS NULL"
);

/// [`RECEIPT_SQL`] inside a commit: the operation must also belong to the committing Room.
const COMMIT_RECEIPT_SQL: &str = concat!(
    "UPDATE operations SET receipt = ?3, status = 'receipted', updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND lease_generation = ?2 AND status = 'in_flight' \
       AND receipt IS NULL AND room_id = ?4"
);

const APPLIED_SQL: &str = concat!(
    "UPDATE operations SET status = 'applied', updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND room_id = ?2"
);

const CANCEL_SQL: &str = concat!(
    "UPDATE operations SET cancel_requested = 1, updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND room_id = ?2"
);

const OUTBOX_SQL: &str = concat!(
    "INSERT INTO outbox (notification_id, room_id, body, created_ms) VALUES (?1, ?2, ?3, ",
    now_ms!(),
    ") ON CONFLICT (notification_id) DO NOTHING"
);

/// Claims in-flight operations without a receipt whose lease expired (or never existed),
/// oldest first; the writer's `BEGIN IMMEDIATE` makes the claim exclusive. It reads only the
/// `in_flight` range of `operations_by_status`, never applied or settled operations.
pub const CLAIM_SQL: &str = concat!(
    "UPDATE operations SET lease_generation = lease_generation + 1, lease_owner = ?1, \
     lease_expires_at = ",
    now_ms!(),
    " + ?2, recovery_attempts = recovery_attempts + 1, updated_ms = ",
    now_ms!(),
    " WHERE op_key IN (SELECT op_key FROM operations \
        WHERE status = 'in_flight' AND receipt IS NULL \
          AND (lease_expires_at IS NULL OR lease_expires_at <= ",
    now_ms!(),
    ") ORDER BY op_key LIMIT ?3) RETURNING ",
    operation_columns!()
);

const HEARTBEAT_SQL: &str = concat!(
    "UPDATE operations SET lease_expires_at = ",
    now_ms!(),
    " + ?3, updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND lease_generation = ?2 AND status = 'in_flight' \
       AND receipt IS NULL RETURNING cancel_requested"
);

const UNCERTAIN_SQL: &str = concat!(
    "UPDATE operations SET status = 'uncertain', updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND lease_generation = ?2 AND status = 'in_flight' \
       AND receipt IS NULL"
);

/// Gives up a lease at generation `?2` of an in-flight operation without a receipt: expired
/// now (claimable at once), the generation moved on so the releasing holder's late writes
/// are fenced.
const RELEASE_SQL: &str = concat!(
    "UPDATE operations SET lease_generation = lease_generation + 1, lease_owner = NULL, \
     lease_expires_at = ",
    now_ms!(),
    ", updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND lease_generation = ?2 AND status = 'in_flight' \
       AND receipt IS NULL"
);

/// Counts a recovery attempt on an uncertain operation (recovery asked its reconciler again)
/// and returns the new count.
const COUNT_ATTEMPT_SQL: &str = concat!(
    "UPDATE operations SET recovery_attempts = recovery_attempts + 1, updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND status = 'uncertain' RETURNING recovery_attempts"
);

const DEAD_LETTER_SQL: &str = concat!(
    "UPDATE operations SET status = 'dead_letter', dead_letter_reason = ?2, updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND status IN ('in_flight', 'uncertain') AND receipt IS NULL"
);

const RESOLVE_SQL: &str = concat!(
    "UPDATE operations SET status = 'resolved', resolution = ?2, updated_ms = ",
    now_ms!(),
    " WHERE op_id = ?1 AND status IN ('uncertain', 'dead_letter')"
);

/// The undelivered notifications, oldest first: the partial index `outbox_undelivered`
/// holds only those.
pub const UNDELIVERED_SQL: &str = "SELECT room_id, body, attempts FROM outbox \
     WHERE delivered_ms IS NULL ORDER BY outbox_key LIMIT ?1";

const OPERATION_SQL: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations WHERE op_id = ?1"
);

const OPEN_OPERATIONS_SQL: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations WHERE status NOT IN ('applied', 'resolved') ORDER BY op_key"
);

const ROOM_OPERATIONS_SQL: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations WHERE room_id = ?1 AND (?2 IS NULL OR status = ?2) ORDER BY op_key"
);

const OPERATIONS_BY_STATUS_SQL: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations WHERE status = ?1 ORDER BY op_key"
);

/// Room state, history, events, operations, the ledger and the outbox on one SQLite file.
pub struct SqliteRooms {
    pub(crate) connections: Arc<Connections>,
    history: RoomHistory,
}

impl std::fmt::Debug for SqliteRooms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteRooms")
            .field("durability", &self.connections.durability())
            .finish_non_exhaustive()
    }
}

pub(crate) fn db(context: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::database(context, e)
}

pub(crate) fn to_json<T: Serialize + ?Sized>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::corrupt(what, e))
}

pub(crate) fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::corrupt(what, e))
}

fn millis(duration: Duration) -> i64 {
    agentroom_ports::lease_millis(duration)
}

pub(crate) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(crate) fn immediate(connection: &mut Connection) -> Result<Transaction<'_>, StoreError> {
    connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db("starting a write"))
}

/// An operation row as read, before its JSON is parsed.
struct OperationRow {
    room: String,
    request: String,
    status: String,
    generation: i64,
    lease_owner: Option<String>,
    lease_expired: bool,
    cancel_requested: bool,
    receipt: Option<String>,
    recovery_attempts: i64,
    dead_letter_reason: Option<String>,
    resolution: Option<String>,
}

fn operation_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<OperationRow> {
    Ok(OperationRow {
        room: row.get(1)?,
        request: row.get(2)?,
        status: row.get(3)?,
        generation: row.get(4)?,
        lease_owner: row.get(5)?,
        lease_expired: row.get(6)?,
        cancel_requested: row.get(7)?,
        receipt: row.get(8)?,
        recovery_attempts: row.get(9)?,
        dead_letter_reason: row.get(10)?,
        resolution: row.get(11)?,
    })
}

impl OperationRow {
    fn parse(self) -> Result<OperationRecord, StoreError> {
        let room = RoomId::parse(&self.room)
            .map_err(|e| StoreError::corrupt("the room of an operation", e))?;
        let request: agentroom_domain::engine::CallRequest =
            from_json(&self.request, "an operation's request")?;
        let op = request.op;
        let status = OperationStatus::parse(&self.status).ok_or_else(|| {
            StoreError::inconsistent(format!("operation {op} has status `{}`", self.status))
        })?;
        let receipt = self
            .receipt
            .map(|r| from_json::<Receipt>(&r, "an operation's receipt"))
            .transpose()?;
        let resolution = self
            .resolution
            .map(|r| from_json::<Resolution>(&r, "an operation's resolution"))
            .transpose()?;
        Ok(OperationRecord {
            room,
            request,
            status,
            generation: self.generation,
            lease_owner: self.lease_owner,
            lease_expired: self.lease_expired,
            cancel_requested: self.cancel_requested,
            receipt,
            recovery_attempts: u32::try_from(self.recovery_attempts).unwrap_or(u32::MAX),
            dead_letter_reason: self.dead_letter_reason,
            resolution,
        })
    }
}

/// A Room's current revision.
/// Persists `event` at `at` unless its id is stored: whether it was inserted.
fn insert_event(
    connection: &Connection,
    event: &Event,
    at: Timestamp,
) -> Result<bool, rusqlite::Error> {
    let text = serde_json::to_string(event)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let inserted = connection
        .prepare_cached(
            "INSERT INTO room_events (event_id, room_id, event, at_ms) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (event_id) DO NOTHING",
        )?
        .execute(params![
            event.id.to_string(),
            event.room.as_str(),
            text,
            at.as_millis()
        ])?;
    Ok(inserted == 1)
}

fn current_revision(
    connection: &Connection,
    room: &RoomId,
) -> Result<Option<Revision>, StoreError> {
    let current: Option<i64> = connection
        .prepare_cached("SELECT revision FROM rooms WHERE room_id = ?1")
        .and_then(|mut s| s.query_row([room.as_str()], |row| row.get(0)).optional())
        .map_err(db("reading a room"))?;
    Ok(current.map(Revision))
}

/// The deltas of `room`'s revisions after `after` up to `upto`, in order.
fn deltas(
    connection: &Connection,
    room: &RoomId,
    after: Revision,
    upto: Revision,
) -> Result<Vec<String>, StoreError> {
    let err = db("reading a room's history");
    let mut statement = connection
        .prepare_cached(
            "SELECT revision, delta FROM room_history \
             WHERE room_id = ?1 AND revision > ?2 AND revision <= ?3 ORDER BY revision",
        )
        .map_err(&err)?;
    let rows = statement
        .query_map(params![room.as_str(), after.0, upto.0], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?))
        })
        .map_err(&err)?;
    let mut deltas = Vec::new();
    for row in rows {
        let (revision, delta) = row.map_err(&err)?;
        deltas.push(delta.ok_or_else(|| {
            StoreError::inconsistent(format!(
                "room {room} has no change stored for revision {revision}"
            ))
        })?);
    }
    Ok(deltas)
}

/// The state of `room` at `target`, rebuilt from the nearest snapshot at or before it and the
/// deltas after that snapshot (D1). Reads inside one transaction, so it sees one committed
/// version of the file.
fn rebuild(
    connection: &Connection,
    room: &RoomId,
    target: Revision,
) -> Result<Rebuilt, StoreError> {
    let snapshot: Option<(i64, String)> = connection
        .prepare_cached(
            "SELECT revision, state FROM room_snapshots \
             WHERE room_id = ?1 AND revision <= ?2 ORDER BY revision DESC LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row(params![room.as_str(), target.0], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()
        })
        .map_err(db("reading a room's snapshot"))?;
    let Some((base, state)) = snapshot else {
        return Err(StoreError::inconsistent(format!(
            "room {room} has no snapshot at or before revision {target}"
        )));
    };
    let base = Revision(base);
    let deltas = deltas(connection, room, base, target)?;
    history::rebuild(room, base, &state, target, &deltas)
}

impl SqliteRooms {
    /// Opens an existing, migrated database. Never creates or migrates it (D5): a missing
    /// file or a schema behind this binary is [`StoreError::NotMigrated`].
    pub fn open(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let connections = Connections::open(path, durability).map_err(|e| match e {
            OpenError::NotMigrated(detail) => StoreError::not_migrated(detail),
            OpenError::Database(context, e) => StoreError::database(context, e),
        })?;
        Ok(Self {
            connections: Arc::new(connections),
            history: RoomHistory::new(),
        })
    }

    /// The planning repository of the same file on this store's connections: a process that
    /// needs both opens the file once and keeps one writer (two writers of one process would
    /// only wait on each other's `BEGIN IMMEDIATE`).
    pub fn planning(&self) -> crate::SqlitePlanning {
        crate::SqlitePlanning::sharing(Arc::clone(&self.connections))
    }

    /// The durability its commits have.
    pub fn durability(&self) -> Durability {
        self.connections.durability()
    }

    /// The stored history row of `revision`: its delta and decision log as stored, in bytes
    /// (for the tests and the benchmark that check a commit writes only what changed).
    pub fn history_row_bytes(&self, room: &RoomId, revision: Revision) -> Result<i64, StoreError> {
        let connection = self.connections.reader();
        let bytes: Option<i64> = connection
            .prepare_cached(
                "SELECT coalesce(length(CAST(delta AS BLOB)), 0) + length(CAST(log AS BLOB)) \
                 + length(CAST(input AS BLOB)) FROM room_history \
                 WHERE room_id = ?1 AND revision = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![room.as_str(), revision.0], |row| row.get(0))
                    .optional()
            })
            .map_err(db("reading a history row"))?;
        Ok(bytes.unwrap_or(0))
    }

    /// The query plan SQLite chooses for `sql` (for the tests that check what a claim and
    /// the outbox read).
    pub fn explain(&self, sql: &str) -> Result<Vec<String>, StoreError> {
        let connection = self.connections.reader();
        let err = db("explain");
        let mut statement = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .map_err(&err)?;
        let params: Vec<i64> = vec![1; statement.parameter_count()];
        let rows = statement
            .query_map(rusqlite::params_from_iter(params), |row| {
                row.get::<_, String>(3)
            })
            .map_err(&err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(&err)
    }

    fn write_ledger(
        tx: &Transaction<'_>,
        room: &RoomId,
        entries: &[LedgerEntry],
        revision: i64,
    ) -> Result<(), StoreError> {
        let err = db("appending ledger entries");
        let mut statement = tx.prepare_cached(LEDGER_SQL).map_err(&err)?;
        for entry in entries {
            statement
                .execute(params![
                    room.as_str(),
                    to_json(entry, "a ledger entry")?,
                    revision
                ])
                .map_err(&err)?;
        }
        Ok(())
    }
}

/// A new operation row, serialized.
struct PreparedOperation {
    op: String,
    request: String,
    generation: i64,
    owner: Option<String>,
    lease_ms: Option<i64>,
}

/// What a commit writes besides its history, serialized before the writer is taken.
struct Prepared {
    log: String,
    operations: Vec<PreparedOperation>,
    receipts: Vec<(OperationId, i64, String)>,
    ledger: Vec<String>,
    notifications: Vec<(String, String)>,
}

/// Everything one commit writes, in `tx`, once its compare-and-swap at `expected` matched;
/// an error leaves `tx` to be dropped, which writes nothing.
fn write_commit(
    tx: &Transaction<'_>,
    room: &RoomId,
    expected: Revision,
    commit: &Commit<'_>,
    staged: &history::Staged,
    prepared: &Prepared,
) -> Result<(), CommitError> {
    let next = expected.next();
    let err = db("committing");
    let swapped = tx
        .prepare_cached(CAS_SQL)
        .and_then(|mut s| s.execute(params![room.as_str(), expected.0, commit.at.as_millis()]))
        .map_err(&err)?;
    if swapped == 0 {
        let actual: Option<i64> = tx
            .prepare_cached("SELECT revision FROM rooms WHERE room_id = ?1")
            .and_then(|mut s| s.query_row([room.as_str()], |row| row.get(0)).optional())
            .map_err(&err)?;
        return Err(match actual {
            None => CommitError::UnknownRoom(room.clone()),
            Some(actual) => CommitError::Conflict {
                room: room.clone(),
                expected,
                actual: Revision(actual),
            },
        });
    }
    // T1: an event is accepted once per Room (the writer lock orders every commit; the
    // unique index is the backstop). Returning drops the transaction: nothing is written.
    if let Some(event) = commit.event {
        let accepted: Option<i64> = tx
            .prepare_cached(
                "SELECT 1 FROM room_history WHERE room_id = ?1 AND event_id = ?2 LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![room.as_str(), event.to_string()], |row| row.get(0))
                    .optional()
            })
            .map_err(&err)?;
        if accepted.is_some() {
            return Err(CommitError::AlreadyAccepted {
                room: room.clone(),
                event,
            });
        }
    }
    // Issue 21: an event persisted by the decision that accepts it, unless its id is
    // stored already (the caller then persists it the checked way and accepts it).
    if let Some(event) = commit.new_event
        && !insert_event(tx, event, commit.at).map_err(&err)?
    {
        return Err(CommitError::EventStored {
            room: room.clone(),
            event: event.id,
        });
    }
    // An operator input is decided once per Room, checked the same way.
    if let Some(input) = commit.input_id {
        let decided: Option<i64> = tx
            .prepare_cached(INPUT_DECIDED_SQL)
            .and_then(|mut s| {
                s.query_row(params![room.as_str(), input.to_string()], |row| row.get(0))
                    .optional()
            })
            .map_err(&err)?;
        if decided.is_some() {
            return Err(CommitError::AlreadyDecided {
                room: room.clone(),
                input,
            });
        }
    }
    tx.prepare_cached(HISTORY_SQL)
        .and_then(|mut s| {
            s.execute(params![
                room.as_str(),
                next.0,
                commit.input,
                commit.event.map(|e| e.to_string()),
                staged.delta(),
                prepared.log,
                commit.at.as_millis(),
                commit.input_id.map(|i| i.to_string())
            ])
        })
        .map_err(&err)?;
    if let Some(snapshot) = staged.snapshot() {
        tx.prepare_cached(SNAPSHOT_SQL)
            .and_then(|mut s| s.execute(params![room.as_str(), next.0, snapshot]))
            .map_err(&err)?;
    }
    if !prepared.operations.is_empty() {
        let mut statement = tx.prepare_cached(NEW_OPERATION_SQL).map_err(&err)?;
        for op in &prepared.operations {
            statement
                .execute(params![
                    op.op,
                    room.as_str(),
                    op.request,
                    op.generation,
                    op.owner,
                    op.lease_ms
                ])
                .map_err(&err)?;
        }
    }
    if !prepared.receipts.is_empty() {
        let mut statement = tx.prepare_cached(COMMIT_RECEIPT_SQL).map_err(&err)?;
        for (op, generation, receipt) in &prepared.receipts {
            let written = statement
                .execute(params![op.to_string(), generation, receipt, room.as_str()])
                .map_err(&err)?;
            if written == 0 {
                // Dropping the transaction rolls back everything this commit wrote.
                return Err(CommitError::Fenced {
                    op: *op,
                    generation: *generation,
                });
            }
        }
    }
    for (sql, ops) in [
        (APPLIED_SQL, &commit.applied),
        (CANCEL_SQL, &commit.cancellations),
    ] {
        if ops.is_empty() {
            continue;
        }
        let mut statement = tx.prepare_cached(sql).map_err(&err)?;
        for op in ops {
            statement
                .execute(params![op.to_string(), room.as_str()])
                .map_err(&err)?;
        }
    }
    if !prepared.ledger.is_empty() {
        let mut statement = tx.prepare_cached(LEDGER_SQL).map_err(&err)?;
        for entry in &prepared.ledger {
            statement
                .execute(params![room.as_str(), entry, next.0])
                .map_err(&err)?;
        }
    }
    if !prepared.notifications.is_empty() {
        let mut statement = tx.prepare_cached(OUTBOX_SQL).map_err(&err)?;
        for (id, body) in &prepared.notifications {
            statement
                .execute(params![id, room.as_str(), body])
                .map_err(&err)?;
        }
    }
    // B8: a decision that moves the pool the Room draws on moves it in this transaction;
    // a pool that refuses drops it, and nothing is written.
    if let Some(pool) = commit
        .state
        .pool()
        .filter(|_| agentroom_domain::pool::moves_pool(&commit.ledger))
        && let Err(reason) = crate::pools::follow_in(tx, room, pool, &commit.ledger, commit.at)?
    {
        return Err(CommitError::PoolRefused {
            room: room.clone(),
            pool: pool.clone(),
            reason,
        });
    }
    if !commit.scrubs.is_empty() {
        scrub(tx, room, &commit.scrubs)?;
    }
    if !commit.archived.is_empty() {
        crate::records::keep(tx, room, next, commit.archived)?;
    }
    if !commit.contents.is_empty() {
        let mut statement = tx.prepare_cached(CONTENT_SQL).map_err(&err)?;
        for content in &commit.contents {
            statement
                .execute(params![
                    room.as_str(),
                    content.digest().as_str(),
                    content.media_type(),
                    content.bytes(),
                    limit(content.bytes().len()),
                    commit.at.as_millis()
                ])
                .map_err(&err)?;
        }
    }
    Ok(())
}

/// Serializes what `commit` writes besides its history.
fn prepare(commit: &Commit<'_>) -> Result<Prepared, StoreError> {
    let operations = commit
        .operations
        .iter()
        .map(|op| {
            let (generation, owner, lease_ms) = match &op.lease {
                Some(lease) => (1, Some(lease.owner.clone()), Some(millis(lease.duration))),
                None => (0, None, None),
            };
            Ok(PreparedOperation {
                op: op.request.op.to_string(),
                request: to_json(&op.request, "an operation's request")?,
                generation,
                owner,
                lease_ms,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let receipts = commit
        .receipts
        .iter()
        .map(|(op, generation, receipt)| Ok((*op, *generation, to_json(receipt, "a receipt")?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
    let ledger = commit
        .ledger
        .iter()
        .map(|e| to_json(e, "a ledger entry"))
        .collect::<Result<Vec<_>, _>>()?;
    let notifications = commit
        .notifications
        .iter()
        .map(|n| Ok((n.id.to_string(), to_json(n, "a notification")?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Prepared {
        log: to_json(commit.log, "a decision log")?,
        operations,
        receipts,
        ledger,
        notifications,
    })
}

#[async_trait]
impl RoomStore for SqliteRooms {
    #[tracing::instrument(skip_all, fields(room = %state.room()))]
    async fn create(&self, state: &RoomState, at: Timestamp) -> Result<Revision, StoreError> {
        let room = state.room();
        let opening = state
            .ledger()
            .opening()
            .ok_or_else(|| StoreError::NotFresh(room.clone()))?;
        let creation = RoomHistory::create(state)?;
        let mut connection = self.connections.writer();
        let tx = immediate(&mut connection)?;
        let err = db("creating a room");
        let inserted = tx
            .prepare_cached(
                "INSERT INTO rooms (room_id, revision, created_ms, updated_ms) \
                 VALUES (?1, 1, ?2, ?2) ON CONFLICT (room_id) DO NOTHING",
            )
            .and_then(|mut s| s.execute(params![room.as_str(), at.as_millis()]))
            .map_err(&err)?;
        if inserted == 0 {
            return Err(StoreError::RoomExists(room.clone()));
        }
        let first = Revision::FIRST.0;
        tx.prepare_cached(HISTORY_SQL)
            .and_then(|mut s| {
                s.execute(params![
                    room.as_str(),
                    first,
                    "create",
                    None::<String>,
                    None::<String>,
                    "[]",
                    at.as_millis(),
                    None::<String>
                ])
            })
            .map_err(&err)?;
        tx.prepare_cached(SNAPSHOT_SQL)
            .and_then(|mut s| s.execute(params![room.as_str(), first, creation.snapshot()]))
            .map_err(&err)?;
        Self::write_ledger(&tx, room, &[opening], first)?;
        tx.commit().map_err(db("committing a new room"))?;
        drop(connection);
        self.history.created(room, creation);
        Ok(Revision::FIRST)
    }

    async fn revision(&self, room: &RoomId) -> Result<Option<Revision>, StoreError> {
        current_revision(&self.connections.reader(), room)
    }

    async fn load(&self, room: &RoomId) -> Result<Option<StoredRoom>, StoreError> {
        let known = self.history.known(room);
        let mut connection = self.connections.reader();
        let Some(current) = current_revision(&connection, room)? else {
            return Ok(None);
        };
        // The latest document this store knows is the current one: nothing more to read.
        if let Some(state) = self.history.state_at(room, current) {
            drop(connection);
            return state.map(|state| {
                Some(StoredRoom {
                    state,
                    revision: current,
                })
            });
        }
        let err = db("reading a room");
        let tx = connection.transaction().map_err(&err)?;
        let Some(current) = current_revision(&tx, room)? else {
            return Ok(None);
        };
        // Only the deltas since the document this store knows, when it is not far behind;
        // else the latest snapshot and the deltas after it.
        if let Some(known) = known.filter(|k| k.catches_up_to(current)) {
            let deltas = deltas(&tx, room, known.revision(), current)?;
            if let Some(state) = self.history.catch_up(room, known, current, &deltas, None)? {
                return Ok(Some(StoredRoom {
                    state,
                    revision: current,
                }));
            }
        }
        let rebuilt = rebuild(&tx, room, current)?;
        drop(tx);
        drop(connection);
        let state = self.history.loaded(room, current, rebuilt, None)?;
        Ok(Some(StoredRoom {
            state,
            revision: current,
        }))
    }

    #[tracing::instrument(skip_all, fields(room = %room, expected = %expected))]
    async fn commit(
        &self,
        room: &RoomId,
        expected: Revision,
        commit: Commit<'_>,
    ) -> Result<Revision, CommitError> {
        let next = expected.next();
        let staged = self.history.stage(room, expected, &commit)?;
        let prepared = prepare(&commit)?;
        let mut connection = self.connections.writer();
        let tx = immediate(&mut connection)?;
        write_commit(&tx, room, expected, &commit, &staged, &prepared)?;
        tx.commit().map_err(db("committing"))?;
        drop(connection);
        self.history.committed(room, next, staged, None);
        if !commit.scrubs.texts.is_empty() {
            // Its document was staged from the state before the scrub's rows: rebuilt at the
            // next load from the scrubbed ones.
            self.history.forget(room);
        }
        Ok(next)
    }

    #[tracing::instrument(skip_all, fields(room = %room, expected = %expected, commits = commits.len()))]
    async fn commit_group(
        &self,
        room: &RoomId,
        expected: Revision,
        commits: Vec<Commit<'_>>,
    ) -> Result<Vec<Revision>, CommitError> {
        agentroom_ports::refuse_in_group(&commits)?;
        let staged = self.history.stage_group(room, expected, &commits)?;
        let prepared = commits.iter().map(prepare).collect::<Result<Vec<_>, _>>()?;
        let mut connection = self.connections.writer();
        // One transaction: a member refused drops it, and nothing of the group is written.
        let tx = immediate(&mut connection)?;
        let mut at = expected;
        let mut revisions = Vec::with_capacity(commits.len());
        for ((commit, staged), prepared) in commits.iter().zip(&staged).zip(&prepared) {
            write_commit(&tx, room, at, commit, staged, prepared)?;
            if at == expected {
                agentroom_ports::rooms::inside_group();
            }
            at = at.next();
            revisions.push(at);
        }
        tx.commit().map_err(db("committing a group"))?;
        drop(connection);
        for (staged, revision) in staged.into_iter().zip(&revisions) {
            self.history.committed(room, *revision, staged, None);
        }
        Ok(revisions)
    }

    async fn state_at(
        &self,
        room: &RoomId,
        revision: Revision,
    ) -> Result<Option<RoomState>, StoreError> {
        if let Some(state) = self.history.state_at(room, revision) {
            return state.map(Some);
        }
        let mut connection = self.connections.reader();
        let tx = connection.transaction().map_err(db("reading a room"))?;
        let Some(current) = current_revision(&tx, room)? else {
            return Ok(None);
        };
        if revision < Revision::FIRST || revision > current {
            return Ok(None);
        }
        let rebuilt = rebuild(&tx, room, revision)?;
        drop(tx);
        drop(connection);
        rebuilt.state().map(Some)
    }

    async fn ledger(&self, room: &RoomId) -> Result<Vec<LedgerEntry>, StoreError> {
        let connection = self.connections.reader();
        let err = db("reading the ledger");
        let mut statement = connection
            .prepare_cached("SELECT entry FROM ledger_entries WHERE room_id = ?1 ORDER BY seq")
            .map_err(&err)?;
        let mut rows = statement.query([room.as_str()]).map_err(&err)?;
        let mut entries = Vec::new();
        while let Some(row) = rows.next().map_err(&err)? {
            let text = row.get_ref(0).and_then(|v| Ok(v.as_str()?)).map_err(&err)?;
            entries.push(from_json(text, "a ledger entry")?);
        }
        Ok(entries)
    }

    #[tracing::instrument(skip_all, fields(room = %event.room, event = %event.id))]
    async fn append_event(&self, event: &Event, at: Timestamp) -> Result<EventAppend, StoreError> {
        let mut connection = self.connections.writer();
        let tx = immediate(&mut connection)?;
        let err = db("appending an event");
        if insert_event(&tx, event, at).map_err(&err)? {
            tx.commit().map_err(&err)?;
            return Ok(EventAppend::Inserted);
        }
        let stored: String = tx
            .prepare_cached("SELECT event FROM room_events WHERE event_id = ?1")
            .and_then(|mut s| s.query_row([event.id.to_string()], |row| row.get(0)))
            .map_err(&err)?;
        let stored: Event = from_json(&stored, "a stored event")?;
        if &stored == event {
            Ok(EventAppend::Existed)
        } else {
            Err(StoreError::EventMismatch(event.id))
        }
    }

    async fn event(&self, room: &RoomId, id: EventId) -> Result<Option<Event>, StoreError> {
        let connection = self.connections.reader();
        let text: Option<String> = connection
            .prepare_cached("SELECT event FROM room_events WHERE event_id = ?1 AND room_id = ?2")
            .and_then(|mut s| {
                s.query_row(params![id.to_string(), room.as_str()], |row| row.get(0))
                    .optional()
            })
            .map_err(db("reading an event"))?;
        text.map(|t| from_json(&t, "a stored event")).transpose()
    }

    async fn unaccepted_events(
        &self,
        room: &RoomId,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let connection = self.connections.reader();
        let err = db("reading unaccepted events");
        let mut statement = connection
            .prepare_cached(
                "SELECT e.event FROM room_events e WHERE e.room_id = ?1 AND NOT EXISTS \
                 (SELECT 1 FROM room_history h WHERE h.room_id = e.room_id \
                  AND h.event_id = e.event_id) \
                 ORDER BY e.at_ms, e.event_id LIMIT ?2",
            )
            .map_err(&err)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = statement
            .query_map(params![room.as_str(), limit], |row| row.get::<_, String>(0))
            .map_err(&err)?;
        let mut events = Vec::new();
        for row in rows {
            events.push(from_json(&row.map_err(&err)?, "a stored event")?);
        }
        Ok(events)
    }

    async fn input_decided(
        &self,
        room: &RoomId,
        input: InputId,
    ) -> Result<Option<Revision>, StoreError> {
        let connection = self.connections.reader();
        let revision: Option<i64> = connection
            .prepare_cached(INPUT_DECIDED_SQL)
            .and_then(|mut s| {
                s.query_row(params![room.as_str(), input.to_string()], |row| row.get(0))
                    .optional()
            })
            .map_err(db("reading a decided input"))?;
        Ok(revision.map(Revision))
    }

    async fn history(
        &self,
        room: &RoomId,
        after: Revision,
        limit_to: usize,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        let connection = self.connections.reader();
        let err = db("reading a Room's history");
        let mut statement = connection
            .prepare_cached(
                "SELECT revision, input, event_id, input_id, log, at_ms FROM room_history \
                 WHERE room_id = ?1 AND revision > ?2 ORDER BY revision LIMIT ?3",
            )
            .map_err(&err)?;
        let rows = statement
            .query_map(params![room.as_str(), after.0, limit(limit_to)], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, i64>(5)?,
                ))
            })
            .map_err(&err)?;
        let mut entries = Vec::new();
        for row in rows {
            let (revision, input, event, input_id, log, at) = row.map_err(&err)?;
            let corrupt = |what: &str, text: &str| {
                StoreError::inconsistent(format!("{what} {text} of history row {revision}"))
            };
            entries.push(HistoryEntry {
                revision: Revision(revision),
                input,
                event: event
                    .map(|e| e.parse().map_err(|_| corrupt("event id", &e)))
                    .transpose()?,
                input_id: input_id
                    .map(|i| i.parse().map_err(|_| corrupt("input id", &i)))
                    .transpose()?,
                log: from_json(&log, "a decision log")?,
                at: Timestamp::from_millis(at),
            });
        }
        Ok(entries)
    }

    async fn delivered(
        &self,
        room: &RoomId,
        after: i64,
        limit_to: usize,
    ) -> Result<Vec<Delivered>, StoreError> {
        let connection = self.connections.reader();
        let err = db("reading delivered notifications");
        let mut statement = connection
            .prepare_cached(
                "SELECT delivered_seq, body FROM outbox \
                 WHERE delivered_seq IS NOT NULL AND delivered_seq > ?2 AND room_id = ?1 \
                 ORDER BY delivered_seq LIMIT ?3",
            )
            .map_err(&err)?;
        let rows = statement
            .query_map(params![room.as_str(), after, limit(limit_to)], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(&err)?;
        let mut delivered = Vec::new();
        for row in rows {
            let (position, body) = row.map_err(&err)?;
            delivered.push(Delivered {
                position,
                notification: from_json(&body, "a notification")?,
            });
        }
        Ok(delivered)
    }

    async fn outbox_position(
        &self,
        room: &RoomId,
        id: NotificationId,
    ) -> Result<Option<OutboxPosition>, StoreError> {
        let connection = self.connections.reader();
        let position: Option<Option<i64>> = connection
            .prepare_cached(
                "SELECT delivered_seq FROM outbox WHERE notification_id = ?1 AND room_id = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![id.to_string(), room.as_str()], |row| row.get(0))
                    .optional()
            })
            .map_err(db("reading a notification's position"))?;
        Ok(position.map(|p| p.map_or(OutboxPosition::Undelivered, OutboxPosition::Delivered)))
    }

    async fn rooms(
        &self,
        after: Option<&RoomId>,
        limit_to: usize,
    ) -> Result<Vec<RoomId>, StoreError> {
        let connection = self.connections.reader();
        let err = db("listing rooms");
        // SQLite compares TEXT bytewise (BINARY): byte order, like every store.
        let mut statement = connection
            .prepare_cached(
                "SELECT room_id FROM rooms WHERE ?1 IS NULL OR room_id > ?1 \
                 ORDER BY room_id LIMIT ?2",
            )
            .map_err(&err)?;
        let rows = statement
            .query_map(params![after.map(RoomId::as_str), limit(limit_to)], |row| {
                row.get::<_, String>(0)
            })
            .map_err(&err)?;
        let mut rooms = Vec::new();
        for row in rows {
            let id = row.map_err(&err)?;
            rooms.push(RoomId::parse(&id).map_err(|e| StoreError::corrupt("a room id", e))?);
        }
        Ok(rooms)
    }

    async fn objective_record(
        &self,
        room: &RoomId,
        objective: ObjectiveId,
    ) -> Result<Option<ObjectiveRecord>, StoreError> {
        crate::records::one(&self.connections.reader(), room, objective)
    }

    async fn objective_records(
        &self,
        room: &RoomId,
        after: i64,
        limit_to: usize,
    ) -> Result<Vec<(i64, ObjectiveRecord)>, StoreError> {
        crate::records::page(&self.connections.reader(), room, after, limit_to)
    }

    async fn records_by(
        &self,
        room: &RoomId,
        key: &RecordKey,
    ) -> Result<Vec<ObjectiveRecord>, StoreError> {
        crate::records::by(&self.connections.reader(), room, key)
    }
}

/// The revision that decided an operator input of a Room. `?1` room, `?2` input id.
const INPUT_DECIDED_SQL: &str =
    "SELECT revision FROM room_history WHERE room_id = ?1 AND input_id = ?2";

fn collect_operations(
    statement: &mut rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
    context: &'static str,
) -> Result<Vec<(i64, OperationRecord)>, StoreError> {
    let err = db(context);
    let rows = statement
        .query_map(params, |row| {
            Ok((row.get::<_, i64>(0)?, operation_from_row(row)?))
        })
        .map_err(&err)?;
    let mut records = Vec::new();
    for row in rows {
        let (key, row) = row.map_err(&err)?;
        records.push((key, row.parse()?));
    }
    Ok(records)
}

impl SqliteRooms {
    /// Claims up to `limit_to` expired in-flight operations for `lease` and, with
    /// `uncertain`, marks them uncertain in the same transaction.
    fn claim(
        &self,
        lease: &LeaseGrant,
        limit_to: usize,
        uncertain: bool,
    ) -> Result<Vec<ClaimedOperation>, StoreError> {
        let mut connection = self.connections.writer();
        let tx = immediate(&mut connection)?;
        let mut claimed = {
            let mut statement = tx.prepare_cached(CLAIM_SQL).map_err(db("claiming"))?;
            collect_operations(
                &mut statement,
                params![lease.owner, millis(lease.duration), limit(limit_to)],
                "claiming",
            )?
        };
        if uncertain {
            let mut statement = tx
                .prepare_cached(UNCERTAIN_SQL)
                .map_err(db("marking claims uncertain"))?;
            for (_, record) in &mut claimed {
                statement
                    .execute(params![record.op().to_string(), record.generation])
                    .map_err(db("marking claims uncertain"))?;
                record.status = OperationStatus::Uncertain;
            }
        }
        tx.commit().map_err(db("committing a claim"))?;
        claimed.sort_by_key(|(key, _)| *key);
        Ok(claimed
            .into_iter()
            .map(|(_, record)| ClaimedOperation {
                generation: record.generation,
                record,
            })
            .collect())
    }
}

#[async_trait]
impl WorkflowStore for SqliteRooms {
    #[tracing::instrument(skip_all, fields(owner = %lease.owner, limit))]
    async fn claim_expired(
        &self,
        lease: LeaseGrant,
        limit_to: usize,
    ) -> Result<Vec<ClaimedOperation>, StoreError> {
        self.claim(&lease, limit_to, false)
    }

    /// The claims and their uncertain marks in one IMMEDIATE transaction (issue 21).
    #[tracing::instrument(skip_all, fields(owner = %lease.owner, limit))]
    async fn claim_expired_uncertain(
        &self,
        lease: LeaseGrant,
        limit_to: usize,
    ) -> Result<Vec<ClaimedOperation>, StoreError> {
        self.claim(&lease, limit_to, true)
    }

    async fn heartbeat(
        &self,
        op: OperationId,
        generation: i64,
        duration: Duration,
    ) -> Result<Heartbeat, StoreError> {
        let mut answers = self.heartbeat_all(&[(op, generation)], duration).await?;
        answers
            .pop()
            .ok_or_else(|| StoreError::database("heartbeat", "no answer for the lease"))
    }

    /// Every lease in one IMMEDIATE transaction: one commit per process per interval.
    async fn heartbeat_all(
        &self,
        leases: &[(OperationId, i64)],
        duration: Duration,
    ) -> Result<Vec<Heartbeat>, StoreError> {
        let mut connection = self.connections.writer();
        let tx = immediate(&mut connection)?;
        let mut answers = Vec::with_capacity(leases.len());
        {
            let mut statement = tx.prepare_cached(HEARTBEAT_SQL).map_err(db("heartbeat"))?;
            for (op, generation) in leases {
                let cancel: Option<bool> = statement
                    .query_row(
                        params![op.to_string(), generation, millis(duration)],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(db("heartbeat"))?;
                answers.push(match cancel {
                    Some(cancel) => Heartbeat::Extended { cancel },
                    None => Heartbeat::Fenced,
                });
            }
        }
        tx.commit().map_err(db("committing a heartbeat"))?;
        Ok(answers)
    }

    async fn record_receipt(
        &self,
        op: OperationId,
        generation: i64,
        receipt: &Receipt,
    ) -> Result<ReceiptWrite, StoreError> {
        let text = to_json(receipt, "a receipt")?;
        let written = self.write_one(RECEIPT_SQL, params![op.to_string(), generation, text])?;
        Ok(if written {
            ReceiptWrite::Recorded
        } else {
            ReceiptWrite::Fenced
        })
    }

    async fn mark_uncertain(&self, op: OperationId, generation: i64) -> Result<bool, StoreError> {
        self.write_one(UNCERTAIN_SQL, params![op.to_string(), generation])
    }

    async fn count_recovery_attempt(&self, op: OperationId) -> Result<Option<u32>, StoreError> {
        let mut connection = self.connections.writer();
        let tx = immediate(&mut connection)?;
        let count: Option<i64> = tx
            .prepare_cached(COUNT_ATTEMPT_SQL)
            .and_then(|mut s| s.query_row([op.to_string()], |row| row.get(0)).optional())
            .map_err(db("counting a recovery attempt"))?;
        tx.commit().map_err(db("committing a recovery attempt"))?;
        Ok(count.map(|c| u32::try_from(c).unwrap_or(u32::MAX)))
    }

    async fn dead_letter(&self, op: OperationId, reason: &str) -> Result<bool, StoreError> {
        self.write_one(DEAD_LETTER_SQL, params![op.to_string(), reason])
    }

    async fn resolve(&self, op: OperationId, resolution: &Resolution) -> Result<bool, StoreError> {
        let text = to_json(resolution, "a resolution")?;
        self.write_one(RESOLVE_SQL, params![op.to_string(), text])
    }

    async fn operation(&self, op: OperationId) -> Result<Option<OperationRecord>, StoreError> {
        let connection = self.connections.reader();
        let mut statement = connection
            .prepare_cached(OPERATION_SQL)
            .map_err(db("reading an operation"))?;
        let found = collect_operations(&mut statement, [op.to_string()], "reading an operation")?;
        Ok(found.into_iter().next().map(|(_, record)| record))
    }

    async fn operations(
        &self,
        filter: OperationFilter,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        let connection = self.connections.reader();
        let context = "listing operations";
        let found = match filter {
            OperationFilter::Open => {
                let mut statement = connection
                    .prepare_cached(OPEN_OPERATIONS_SQL)
                    .map_err(db(context))?;
                collect_operations(&mut statement, [], context)?
            }
            OperationFilter::Status(status) => {
                let mut statement = connection
                    .prepare_cached(OPERATIONS_BY_STATUS_SQL)
                    .map_err(db(context))?;
                collect_operations(&mut statement, [status.as_str()], context)?
            }
        };
        Ok(found.into_iter().map(|(_, record)| record).collect())
    }

    async fn room_operations(
        &self,
        room: &RoomId,
        status: Option<OperationStatus>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        let connection = self.connections.reader();
        let context = "listing a room's operations";
        let mut statement = connection
            .prepare_cached(ROOM_OPERATIONS_SQL)
            .map_err(db(context))?;
        let found = collect_operations(
            &mut statement,
            params![room.as_str(), status.map(|s| s.as_str())],
            context,
        )?;
        Ok(found.into_iter().map(|(_, record)| record).collect())
    }

    async fn release_lease(&self, op: OperationId, generation: i64) -> Result<bool, StoreError> {
        self.write_one(RELEASE_SQL, params![op.to_string(), generation])
    }
}

impl SqliteRooms {
    /// Runs one write statement in its own `BEGIN IMMEDIATE` transaction; true if it changed
    /// a row.
    fn write_one(
        &self,
        sql: &'static str,
        params: impl rusqlite::Params,
    ) -> Result<bool, StoreError> {
        let mut connection = self.connections.writer();
        let tx = immediate(&mut connection)?;
        let changed = tx
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params))
            .map_err(db("writing an operation"))?;
        tx.commit().map_err(db("committing an operation write"))?;
        Ok(changed > 0)
    }
}

#[async_trait]
impl Outbox for SqliteRooms {
    async fn undelivered(&self, limit_to: usize) -> Result<Vec<OutboxItem>, StoreError> {
        let connection = self.connections.reader();
        let err = db("reading the outbox");
        let mut statement = connection.prepare_cached(UNDELIVERED_SQL).map_err(&err)?;
        let rows = statement
            .query_map([limit(limit_to)], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            })
            .map_err(&err)?;
        let mut items = Vec::new();
        for row in rows {
            let (room, body, attempts) = row.map_err(&err)?;
            let room = RoomId::parse(&room)
                .map_err(|e| StoreError::corrupt("the room of a notification", e))?;
            let notification: Notification = from_json(&body, "a notification")?;
            items.push(OutboxItem {
                room,
                notification,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            });
        }
        Ok(items)
    }

    async fn mark_delivered(&self, id: NotificationId) -> Result<(), StoreError> {
        self.write_one(
            concat!(
                "UPDATE outbox SET delivered_ms = ",
                now_ms!(),
                ", delivered_seq = (SELECT coalesce(max(delivered_seq), 0) + 1 FROM outbox \
                   WHERE delivered_seq IS NOT NULL) \
                 WHERE notification_id = ?1 AND delivered_ms IS NULL"
            ),
            [id.to_string()],
        )
        .map(|_| ())
    }

    async fn mark_attempt(&self, id: NotificationId) -> Result<(), StoreError> {
        self.write_one(
            "UPDATE outbox SET attempts = attempts + 1 \
             WHERE notification_id = ?1 AND delivered_ms IS NULL",
            [id.to_string()],
        )
        .map(|_| ())
    }
}

/// A redaction's removals, in its commit's transaction: the content rows it names, and each
/// redacted memory text scrubbed from the Room's stored deltas and snapshots
/// ([`agentroom_ports::scrub`]).
fn scrub(tx: &Transaction<'_>, room: &RoomId, scrubs: &Scrubs) -> Result<(), CommitError> {
    let err = db("removing redacted content");
    for digest in &scrubs.contents {
        tx.prepare_cached("DELETE FROM room_contents WHERE room_id = ?1 AND digest = ?2")
            .and_then(|mut s| s.execute(params![room.as_str(), digest.as_str()]))
            .map_err(&err)?;
    }
    for (select, update) in [
        (
            "SELECT revision, delta FROM room_history \
             WHERE room_id = ?1 AND delta IS NOT NULL AND instr(delta, ?2) > 0",
            "UPDATE room_history SET delta = ?3 WHERE room_id = ?1 AND revision = ?2",
        ),
        (
            "SELECT revision, state FROM room_snapshots \
             WHERE room_id = ?1 AND instr(state, ?2) > 0",
            "UPDATE room_snapshots SET state = ?3 WHERE room_id = ?1 AND revision = ?2",
        ),
    ] {
        let mut found: BTreeMap<i64, String> = BTreeMap::new();
        for text in &scrubs.texts {
            // The text as its JSON string holds it, without the quotes: what any document
            // holding it as a string contains (serde_json wrote every stored document).
            let quoted = to_json(text, "a redacted memory text")?;
            let inner = quoted
                .strip_prefix('"')
                .and_then(|q| q.strip_suffix('"'))
                .unwrap_or(&quoted);
            let mut statement = tx.prepare_cached(select).map_err(&err)?;
            let rows = statement
                .query_map(params![room.as_str(), inner], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(&err)?;
            for row in rows {
                let (revision, document) = row.map_err(&err)?;
                found.insert(revision, document);
            }
        }
        let mut statement = tx.prepare_cached(update).map_err(&err)?;
        for (revision, document) in found {
            if let Some(scrubbed) = scrub_memory_json(&document, &scrubs.texts) {
                statement
                    .execute(params![room.as_str(), revision, scrubbed])
                    .map_err(&err)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used, reason = "test code")]
    fn a_process_opens_one_set_of_connections_for_rooms_and_planning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("planning.db");
        crate::migrate::up(&path).unwrap();
        let rooms = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap();
        let planning = rooms.planning();
        assert!(Arc::ptr_eq(&rooms.connections, &planning.connections));
        assert_eq!(planning.durability(), Durability::ProcessCrash);
    }
}
