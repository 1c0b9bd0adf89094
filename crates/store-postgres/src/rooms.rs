//! [`PgRooms`]: Room state with compare-and-swap, history as deltas with snapshots, persisted
//! events and the notification outbox on PostgreSQL. A commit is one call of the
//! `room_commit(jsonb)` function (migrations 0002, 0003): one statement, one round trip, one
//! transaction that writes everything a decision writes or nothing (D1, B1, B7, T5).

use std::collections::HashMap;
use std::io;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use agentroom_domain::engine::CallRequest;
use agentroom_domain::engine::{LogEntry, Notification};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, NotificationId, OperationId, PrincipalId, RoomId, Timestamp};
use agentroom_domain::ledger::LedgerEntry;
use agentroom_domain::state::RoomState;
use agentroom_ports::{
    Commit, CommitError, Delta, EventAppend, Outbox, OutboxItem, Receipt, Revision, RoomStore,
    StoreError, StoredRoom,
};
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::migrate::check_migrated;
use crate::sql;

/// A new snapshot is written once the deltas since the last one outweigh it, but never for
/// less than this many delta bytes (tiny states gain nothing from frequent snapshots).
const MIN_SNAPSHOT_INTERVAL_BYTES: i64 = 16 * 1024;

/// Rooms whose last known state a store keeps; past this many it forgets them all.
const KNOWN_ROOMS: usize = 1024;

/// A load of a Room this process knows at most this many revisions behind reads only the
/// deltas since; further behind, the latest snapshot and the deltas after it.
const CATCH_UP_REVISIONS: i64 = 64;

/// What this process last learned about a Room's snapshot, to decide whether a commit also
/// writes one. Only a hint: a stale one costs an early or a late snapshot, never correctness.
#[derive(Debug, Clone, Copy)]
struct SnapshotHint {
    /// Delta bytes committed since the latest snapshot.
    since: i64,
    /// The latest snapshot's size.
    snapshot_bytes: i64,
}

/// The state of a Room at a revision this process loaded or committed, as the JSON document
/// history deltas apply to. A revision's state never changes, so it is never stale: a commit
/// at `expected == revision` diffs against it (instead of serializing the caller's previous
/// state again), and a load applies only the deltas committed since.
#[derive(Debug, Clone)]
struct Known {
    revision: Revision,
    document: Arc<Value>,
    hint: SnapshotHint,
}

/// Room state, history, events, operations and the outbox on PostgreSQL: implements
/// [`RoomStore`], [`WorkflowStore`](agentroom_ports::WorkflowStore) and [`Outbox`]. Cheap to
/// clone (a pool and a shared table of the Rooms' last known states).
#[derive(Debug, Clone)]
pub struct PgRooms {
    pub(crate) pool: PgPool,
    known: Arc<Mutex<HashMap<RoomId, Known>>>,
}

impl PgRooms {
    /// Connects with default pool options and checks that the database is migrated to this
    /// binary's schema; never migrates (D5).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .connect(url)
            .await
            .map_err(|e| StoreError::Database(format!("connecting to PostgreSQL: {e}")))?;
        Self::from_pool(pool).await
    }

    /// Uses `pool` after checking that its database is migrated to this binary's schema;
    /// never migrates (D5).
    pub async fn from_pool(pool: PgPool) -> Result<Self, StoreError> {
        check_migrated(&pool).await.map_err(StoreError::from)?;
        Ok(Self {
            pool,
            known: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// The pool (for the benchmark and for closing it).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn known(&self, room: &RoomId) -> Option<Known> {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room)
            .cloned()
    }

    /// Remembers `known`, the latest revision this process saw (any revision's state is
    /// correct for that revision; the latest one saves the most work).
    fn learn(&self, room: &RoomId, known: Known) {
        let mut table = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if table.len() >= KNOWN_ROOMS && !table.contains_key(room) {
            table.clear();
        }
        table.insert(room.clone(), known);
    }
}

/// Maps a sqlx error to the store's, with what was being done. A missing table or function
/// means the schema was reverted under us: that is `NotMigrated`, not a mere failure.
pub(crate) fn failed(context: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| {
        let code = error.as_database_error().and_then(|e| e.code());
        match code.as_deref() {
            // undefined_table, undefined_function
            Some("42P01" | "42883") => StoreError::NotMigrated(format!("{context}: {error}")),
            _ => StoreError::Database(format!("{context}: {error}")),
        }
    }
}

/// Reads stored JSON text back, or says what could not be read.
pub(crate) fn parse_json<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// Writes JSON text; the domain's types are plain data, so this fails only on a bug.
pub(crate) fn to_json<T: Serialize + ?Sized>(what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("serializing {what}: {e}")))
}

/// How many bytes `value` takes as JSON text, without keeping the text.
fn json_len<T: Serialize + ?Sized>(value: &T) -> u64 {
    struct Count(u64);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len() as u64);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Counting cannot fail; a serialization failure shows up when the commit is serialized.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Rebuilds a state from a stored document and the deltas after it.
fn rebuild(state: &str, deltas: &[String]) -> Result<Value, StoreError> {
    let mut value: Value = parse_json("a Room snapshot", state)?;
    apply(&mut value, deltas)?;
    Ok(value)
}

/// Applies stored deltas, in order, to a document.
fn apply(value: &mut Value, deltas: &[String]) -> Result<(), StoreError> {
    for (i, text) in deltas.iter().enumerate() {
        let delta: Delta = parse_json("a Room history delta", text)?;
        delta
            .apply(value)
            .map_err(|e| StoreError::Corrupt(format!("history delta {i} of a rebuild: {e}")))?;
    }
    Ok(())
}

fn room_state(value: &Value) -> Result<RoomState, StoreError> {
    RoomState::deserialize(value)
        .map_err(|e| StoreError::Corrupt(format!("a rebuilt Room state: {e}")))
}

/// One new operation as `room_commit` reads it.
#[derive(Serialize)]
struct OperationArg<'a> {
    op: OperationId,
    request: &'a CallRequest,
    lease_owner: Option<&'a str>,
    lease_ms: Option<i64>,
}

/// One receipt as `room_commit` reads it.
#[derive(Serialize)]
struct ReceiptArg<'a> {
    op: OperationId,
    generation: i64,
    receipt: &'a Receipt,
}

/// The one argument of `room_commit` (documented in migrations 0002 and 0003).
#[derive(Serialize)]
struct CommitArg<'a> {
    room: &'a str,
    expected: i64,
    delta: &'a Delta,
    delta_bytes: i64,
    input: &'a str,
    event: Option<EventId>,
    log: &'a [LogEntry],
    at: i64,
    ledger: &'a [LedgerEntry],
    operations: Vec<OperationArg<'a>>,
    receipts: Vec<ReceiptArg<'a>>,
    applied: &'a [OperationId],
    cancellations: &'a [OperationId],
    notifications: &'a [Notification],
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot_bytes: Option<i64>,
}

/// Reads `room_commit`'s fenced DETAIL, `<op> <generation>`.
fn fenced(detail: Option<&str>) -> Option<CommitError> {
    let (op, generation) = detail?.split_once(' ')?;
    Some(CommitError::Fenced {
        op: OperationId::from_str(op).ok()?,
        generation: generation.parse().ok()?,
    })
}

#[async_trait]
impl RoomStore for PgRooms {
    #[tracing::instrument(level = "debug", skip_all, fields(room = %state.room()))]
    async fn create(&self, state: &RoomState, at: Timestamp) -> Result<Revision, StoreError> {
        let room = state.room();
        let document = serde_json::to_value(state)
            .map_err(|e| StoreError::Database(format!("serializing a Room state: {e}")))?;
        let text = to_json("a Room state", &document)?;
        let opening = state
            .ledger()
            .opening()
            .ok_or_else(|| StoreError::NotFresh(room.clone()))?;
        let ledger = to_json("the ledger", &[opening])?;
        let bytes = as_i64(text.len() as u64);
        let created: i64 = sqlx::query_scalar(sql::CREATE_ROOM)
            .bind(room.as_str())
            .bind(&text)
            .bind(bytes)
            .bind(at.as_millis())
            .bind(&ledger)
            .fetch_one(&self.pool)
            .await
            .map_err(failed("creating a Room"))?;
        if created != 1 {
            return Err(StoreError::RoomExists(room.clone()));
        }
        self.learn(
            room,
            Known {
                revision: Revision::FIRST,
                document: Arc::new(document),
                hint: SnapshotHint {
                    since: 0,
                    snapshot_bytes: bytes,
                },
            },
        );
        Ok(Revision::FIRST)
    }

    #[tracing::instrument(level = "debug", skip(self), fields(room = %room))]
    async fn load(&self, room: &RoomId) -> Result<Option<StoredRoom>, StoreError> {
        if let Some(known) = self.known(room)
            && let Some(stored) = self.catch_up(room, known).await?
        {
            return Ok(Some(stored));
        }
        let row: Option<(i64, i64, String, i64, i64, Vec<String>)> = sqlx::query_as(sql::LOAD_ROOM)
            .bind(room.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("loading a Room"))?;
        let Some((revision, snapshot, state, snapshot_bytes, since, deltas)) = row else {
            return Ok(None);
        };
        if i64::try_from(deltas.len()).ok() != revision.checked_sub(snapshot) {
            return Err(StoreError::Corrupt(format!(
                "room {room} is at revision {revision} but history holds {} deltas after its \
                 snapshot at {snapshot}",
                deltas.len()
            )));
        }
        let document = rebuild(&state, &deltas)?;
        let state = room_state(&document)?;
        self.learn(
            room,
            Known {
                revision: Revision(revision),
                document: Arc::new(document),
                hint: SnapshotHint {
                    since,
                    snapshot_bytes,
                },
            },
        );
        Ok(Some(StoredRoom {
            state,
            revision: Revision(revision),
        }))
    }

    #[tracing::instrument(level = "debug", skip(self, commit), fields(room = %room, expected = %expected))]
    async fn commit(
        &self,
        room: &RoomId,
        expected: Revision,
        commit: Commit<'_>,
    ) -> Result<Revision, CommitError> {
        let serialize = |e: serde_json::Error| {
            CommitError::Store(StoreError::Database(format!(
                "serializing a Room state: {e}"
            )))
        };
        // The state at `expected` is what the caller passes as `previous`; when this process
        // knows that revision, its document is the stored one and needs no serializing.
        let known = self.known(room);
        let hint = known.as_ref().map(|k| k.hint);
        let previous = match known {
            Some(known) if known.revision == expected => known.document,
            _ => Arc::new(serde_json::to_value(commit.previous).map_err(serialize)?),
        };
        let next = serde_json::to_value(commit.state).map_err(serialize)?;
        let delta = Delta::between(&previous, &next);
        drop(previous);
        let delta_bytes = as_i64(json_len(&delta));
        let snapshot_due = hint.is_some_and(|h| {
            h.since.saturating_add(delta_bytes) >= h.snapshot_bytes.max(MIN_SNAPSHOT_INTERVAL_BYTES)
        });
        let snapshot_bytes = snapshot_due.then(|| as_i64(json_len(&next)));
        let arg = CommitArg {
            room: room.as_str(),
            expected: expected.0,
            delta: &delta,
            delta_bytes,
            input: commit.input,
            event: commit.event,
            log: commit.log,
            at: commit.at.as_millis(),
            ledger: &commit.ledger,
            operations: commit
                .operations
                .iter()
                .map(|o| OperationArg {
                    op: o.request.op,
                    request: &o.request,
                    lease_owner: o.lease.as_ref().map(|l| l.owner.as_str()),
                    lease_ms: o
                        .lease
                        .as_ref()
                        .map(|l| agentroom_ports::lease_millis(l.duration)),
                })
                .collect(),
            receipts: commit
                .receipts
                .iter()
                .map(|(op, generation, receipt)| ReceiptArg {
                    op: *op,
                    generation: *generation,
                    receipt,
                })
                .collect(),
            applied: &commit.applied,
            cancellations: &commit.cancellations,
            notifications: &commit.notifications,
            snapshot: snapshot_due.then_some(&next),
            snapshot_bytes,
        };
        let text = serde_json::to_string(&arg).map_err(serialize)?;
        drop(arg);
        let row: Result<(String, Option<i64>, Option<i64>, Option<i64>), sqlx::Error> =
            sqlx::query_as(sql::COMMIT_ROOM)
                .bind(&text)
                .fetch_one(&self.pool)
                .await;
        let (outcome, revision, since, snapshot_bytes) = match row {
            Ok(row) => row,
            Err(error) => {
                let refusal = error.as_database_error().and_then(|db| {
                    let pg = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
                    match pg.code() {
                        sql::FENCED_SQLSTATE => fenced(pg.detail()),
                        sql::ALREADY_ACCEPTED_SQLSTATE => Some(CommitError::AlreadyAccepted {
                            room: room.clone(),
                            event: EventId::from_str(pg.detail()?).ok()?,
                        }),
                        _ => None,
                    }
                });
                return Err(match refusal {
                    Some(refusal) => refusal,
                    None => CommitError::Store(failed("committing a Room")(error)),
                });
            }
        };
        match (outcome.as_str(), revision) {
            ("committed", Some(revision)) => {
                if let (Some(since), Some(snapshot_bytes)) = (since, snapshot_bytes) {
                    self.learn(
                        room,
                        Known {
                            revision: Revision(revision),
                            document: Arc::new(next),
                            hint: SnapshotHint {
                                since,
                                snapshot_bytes,
                            },
                        },
                    );
                }
                Ok(Revision(revision))
            }
            ("conflict", Some(actual)) => Err(CommitError::Conflict {
                room: room.clone(),
                expected,
                actual: Revision(actual),
            }),
            ("unknown_room", _) => Err(CommitError::UnknownRoom(room.clone())),
            (other, revision) => Err(CommitError::Store(StoreError::Database(format!(
                "room_commit answered `{other}` with revision {revision:?}"
            )))),
        }
    }

    #[tracing::instrument(level = "debug", skip(self), fields(room = %room, revision = %revision))]
    async fn state_at(
        &self,
        room: &RoomId,
        revision: Revision,
    ) -> Result<Option<RoomState>, StoreError> {
        let row: Option<(i64, String, Vec<String>)> = sqlx::query_as(sql::ROOM_STATE_AT)
            .bind(room.as_str())
            .bind(revision.0)
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading a Room's history"))?;
        let Some((snapshot, state, deltas)) = row else {
            return Ok(None);
        };
        // Fewer deltas than asked for: the revision is past the Room's current one.
        if i64::try_from(deltas.len()).ok() != revision.0.checked_sub(snapshot) {
            return Ok(None);
        }
        Ok(Some(room_state(&rebuild(&state, &deltas)?)?))
    }

    #[tracing::instrument(level = "debug", skip(self), fields(room = %room))]
    async fn ledger(&self, room: &RoomId) -> Result<Vec<LedgerEntry>, StoreError> {
        let rows: Vec<String> = sqlx::query_scalar(sql::SELECT_LEDGER)
            .bind(room.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(failed("reading a Room's ledger"))?;
        rows.iter()
            .map(|text| parse_json("a ledger row", text))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %event.room, event = %event.id))]
    async fn append_event(&self, event: &Event, at: Timestamp) -> Result<EventAppend, StoreError> {
        let body = to_json("an event body", &event.body)?;
        let inserted: bool = sqlx::query_scalar(sql::INSERT_EVENT)
            .bind(event.id.to_string())
            .bind(event.room.as_str())
            .bind(event.author.as_str())
            .bind(event.body.kind().as_str())
            .bind(&body)
            .bind(at.as_millis())
            .fetch_one(&self.pool)
            .await
            .map_err(failed("persisting an event"))?;
        if inserted {
            return Ok(EventAppend::Inserted);
        }
        // The id exists (committed before we looked, or by a concurrent writer we waited
        // for): the same event is idempotent, another one under the same id is refused.
        match self.stored_event(event.id).await? {
            Some(stored) if &stored == event => Ok(EventAppend::Existed),
            _ => Err(StoreError::EventMismatch(event.id)),
        }
    }

    #[tracing::instrument(level = "debug", skip(self), fields(room = %room, event = %id))]
    async fn event(&self, room: &RoomId, id: EventId) -> Result<Option<Event>, StoreError> {
        Ok(self.stored_event(id).await?.filter(|e| &e.room == room))
    }

    #[tracing::instrument(level = "debug", skip(self), fields(room = %room))]
    async fn unaccepted_events(
        &self,
        room: &RoomId,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let rows: Vec<(String, String, String)> = sqlx::query_as(sql::SELECT_UNACCEPTED_EVENTS)
            .bind(room.as_str())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(failed("reading unaccepted events"))?;
        let corrupt = |e: agentroom_domain::ids::IdError| StoreError::Corrupt(e.to_string());
        rows.into_iter()
            .map(|(id, author, body)| {
                Ok(Event {
                    id: id
                        .parse()
                        .map_err(|_| StoreError::Corrupt(format!("event id {id}")))?,
                    room: room.clone(),
                    author: PrincipalId::parse(&author).map_err(corrupt)?,
                    body: parse_json::<EventBody>("an event body", &body)?,
                })
            })
            .collect()
    }
}

impl PgRooms {
    /// Loads a Room this process knows by applying only the deltas committed since; `None`
    /// when it is too far behind (or gone), so the caller loads from the latest snapshot.
    async fn catch_up(
        &self,
        room: &RoomId,
        known: Known,
    ) -> Result<Option<StoredRoom>, StoreError> {
        let row: Option<(i64, i64, i64, Option<Vec<String>>)> =
            sqlx::query_as(sql::LOAD_ROOM_SINCE)
                .bind(room.as_str())
                .bind(known.revision.0)
                .bind(CATCH_UP_REVISIONS)
                .fetch_optional(&self.pool)
                .await
                .map_err(failed("loading a Room"))?;
        let Some((revision, snapshot_bytes, since, Some(deltas))) = row else {
            return Ok(None);
        };
        if i64::try_from(deltas.len()).ok() != revision.checked_sub(known.revision.0) {
            return Ok(None);
        }
        let document = if deltas.is_empty() {
            known.document
        } else {
            let mut document = Value::clone(&known.document);
            apply(&mut document, &deltas)?;
            Arc::new(document)
        };
        let state = room_state(&document)?;
        self.learn(
            room,
            Known {
                revision: Revision(revision),
                document,
                hint: SnapshotHint {
                    since,
                    snapshot_bytes,
                },
            },
        );
        Ok(Some(StoredRoom {
            state,
            revision: Revision(revision),
        }))
    }

    async fn stored_event(&self, id: EventId) -> Result<Option<Event>, StoreError> {
        let row: Option<(String, String, String)> = sqlx::query_as(sql::SELECT_EVENT)
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading an event"))?;
        let Some((room, author, body)) = row else {
            return Ok(None);
        };
        let corrupt = |e: agentroom_domain::ids::IdError| StoreError::Corrupt(e.to_string());
        Ok(Some(Event {
            id,
            room: RoomId::parse(&room).map_err(corrupt)?,
            author: PrincipalId::parse(&author).map_err(corrupt)?,
            body: parse_json::<EventBody>("an event body", &body)?,
        }))
    }
}

#[async_trait]
impl Outbox for PgRooms {
    #[tracing::instrument(level = "debug", skip(self))]
    async fn undelivered(&self, limit: usize) -> Result<Vec<OutboxItem>, StoreError> {
        let rows: Vec<(String, String, i32)> = sqlx::query_as(sql::SELECT_UNDELIVERED)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(failed("reading the outbox"))?;
        rows.into_iter()
            .map(|(room, body, attempts)| {
                Ok(OutboxItem {
                    room: RoomId::parse(&room).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    notification: parse_json("an outbox notification", &body)?,
                    attempts: u32::try_from(attempts).unwrap_or(0),
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", skip(self), fields(notification = %id))]
    async fn mark_delivered(&self, id: NotificationId) -> Result<(), StoreError> {
        sqlx::query(sql::MARK_DELIVERED)
            .bind(id.to_string())
            .execute(&self.pool)
            .await
            .map_err(failed("marking a notification delivered"))?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip(self), fields(notification = %id))]
    async fn mark_attempt(&self, id: NotificationId) -> Result<(), StoreError> {
        sqlx::query(sql::MARK_ATTEMPT)
            .bind(id.to_string())
            .execute(&self.pool)
            .await
            .map_err(failed("counting a delivery attempt"))?;
        Ok(())
    }
}
