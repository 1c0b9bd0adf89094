//! [`PgRooms`]: Room state with compare-and-swap, history as deltas with snapshots, persisted
//! events and the notification outbox on PostgreSQL. A commit is one prepared statement
//! ([`sql::commit_room`], migration 0005): one round trip, one transaction that writes
//! everything a decision writes or nothing (D1, B1, B7, T5).

use std::sync::Arc;

use agentroom_domain::archive::ObjectiveRecord;
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{
    EventId, InputId, NotificationId, ObjectiveId, OperationId, PrincipalId, RoomId, Timestamp,
};
use agentroom_domain::ledger::LedgerEntry;
use agentroom_domain::state::RoomState;
use agentroom_ports::history::{
    self, CATCH_UP_REVISIONS, Known, RoomHistory, SnapshotWeight, Staged,
};
use agentroom_ports::scrub::scrub_memory_json;
use agentroom_ports::{
    Commit, CommitError, Delivered, EventAppend, HistoryEntry, NewContent, Outbox, OutboxItem,
    OutboxPosition, Receipt, RecordKey, Revision, RoomStore, StoreError, StoredRoom,
};
use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::held::Held;
use crate::migrate::check_migrated;
use crate::pools::{Followed, follow_in};
use crate::sql;

/// Room state, history, events, operations and the outbox on PostgreSQL: implements
/// [`RoomStore`], [`WorkflowStore`](agentroom_ports::WorkflowStore) and [`Outbox`] (and, in
/// their own modules, [`TokenStore`](agentroom_ports::TokenStore) and
/// [`ArtifactStore`](agentroom_ports::ArtifactStore)). Cheap to clone (a pool and the
/// shared history engine that keeps the Rooms' latest documents).
#[derive(Debug, Clone)]
pub struct PgRooms {
    pub(crate) pool: PgPool,
    /// Connections for the hot path (commit, load, heartbeat, receipt): no pool pings.
    pub(crate) held: Held,
    history: Arc<RoomHistory>,
}

impl PgRooms {
    /// Connects with default pool options and checks that the database is migrated to this
    /// binary's schema; never migrates (D5).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .connect(url)
            .await
            .map_err(|e| StoreError::database("connecting to PostgreSQL", e))?;
        Self::from_pool(pool).await
    }

    /// Uses `pool` after checking that its database is migrated to this binary's schema;
    /// never migrates (D5).
    pub async fn from_pool(pool: PgPool) -> Result<Self, StoreError> {
        check_migrated(&pool).await.map_err(StoreError::from)?;
        Ok(Self {
            held: Held::like(&pool),
            pool,
            history: Arc::new(RoomHistory::new()),
        })
    }

    /// The pool (for the benchmark and for closing it).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The statements prepared on the connection the hot path (commits, loads, heartbeats,
    /// receipts) would use next, with how often each was planned generically and for its
    /// values (`pg_prepared_statements`): what shows whether commits keep their plans.
    pub async fn hot_path_plans(&self) -> Result<Vec<(String, i64, i64)>, StoreError> {
        let context = "reading prepared statements";
        // Reads only: safe to run again on a fresh connection (held::Held::rerunnable).
        self.held
            .rerunnable(|mut conn| async move {
                let rows = sqlx::query_as(
                    "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements",
                )
                .fetch_all(&mut conn)
                .await;
                (conn, rows)
            })
            .await
            .map_err(failed(context))
    }

    /// Closes the pool and the connections the hot path keeps open.
    pub async fn close(&self) {
        self.held.close().await;
        self.pool.close().await;
    }
}

/// Maps a sqlx error to the store's, with what was being done. A missing table or function
/// means the schema was reverted under us: that is `NotMigrated`, not a mere failure.
pub(crate) fn failed(context: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| {
        let code = error.as_database_error().and_then(|e| e.code());
        match code.as_deref() {
            // undefined_table, undefined_function
            Some("42P01" | "42883") => StoreError::NotMigrated {
                context: context.to_owned(),
                source: Some(error.into()),
            },
            _ => StoreError::database(context, error),
        }
    }
}

/// Reads stored JSON text back, or says what could not be read.
pub(crate) fn parse_json<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::corrupt(what, e))
}

/// Writes JSON text; the domain's types are plain data, so this fails only on a bug.
pub(crate) fn to_json<T: Serialize + ?Sized>(what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::database(format!("serializing {what}"), e))
}

/// JSON text of one value of a commit.
fn json_text<T: Serialize + ?Sized>(what: &str, value: &T) -> Result<String, CommitError> {
    serde_json::to_string(value)
        .map_err(|e| CommitError::Store(StoreError::database(format!("serializing {what}"), e)))
}

/// JSON texts of a commit's values, bound as one array.
fn json_texts<'a, T: Serialize + 'a>(
    what: &str,
    values: impl IntoIterator<Item = &'a T>,
) -> Result<Vec<String>, CommitError> {
    values.into_iter().map(|v| json_text(what, v)).collect()
}

/// Operation ids, bound as one array (cast to `uuid[]` by the statement).
fn ids(ops: impl Iterator<Item = OperationId>) -> Vec<String> {
    ops.map(|op| op.to_string()).collect()
}

/// The first receipt of `receipts` that a refused commit did not write, from the refusal's
/// DETAIL: the operations whose receipts it wrote, as a PostgreSQL array (`{<op>,<op>}`).
/// Each written operation accounts for one receipt, so a second receipt of one operation is
/// the fenced one.
fn fenced(receipts: &[(OperationId, i64, Receipt)], written: &str) -> Option<CommitError> {
    let mut written: Vec<&str> = written
        .trim_start_matches('{')
        .trim_end_matches('}')
        .split(',')
        .filter(|op| !op.is_empty())
        .collect();
    receipts.iter().find_map(|(op, generation, _)| {
        let text = op.to_string();
        match written.iter().position(|w| *w == text) {
            Some(at) => {
                written.swap_remove(at);
                None
            }
            None => Some(CommitError::Fenced {
                op: *op,
                generation: *generation,
            }),
        }
    })
}

/// The operations a commit touches, as the statement's arrays (`$16`..`$20`, one element per
/// operation): receipts first, in commit order, then applied and cancelled operations
/// without a receipt.
struct Touched {
    ops: Vec<OperationId>,
    generations: Vec<Option<i64>>,
    receipts: Vec<Option<String>>,
    applied: Vec<bool>,
    cancel: Vec<bool>,
}

impl Touched {
    fn of(commit: &Commit<'_>) -> Result<Self, CommitError> {
        let mut touched = Self {
            ops: Vec::new(),
            generations: Vec::new(),
            receipts: Vec::new(),
            applied: Vec::new(),
            cancel: Vec::new(),
        };
        for (op, generation, receipt) in &commit.receipts {
            let receipt = json_text("a receipt", receipt)?;
            touched.push(commit, *op, Some(*generation), Some(receipt));
        }
        for op in commit.applied.iter().chain(&commit.cancellations) {
            if !touched.ops.contains(op) {
                touched.push(commit, *op, None, None);
            }
        }
        Ok(touched)
    }

    fn push(
        &mut self,
        commit: &Commit<'_>,
        op: OperationId,
        generation: Option<i64>,
        receipt: Option<String>,
    ) {
        self.ops.push(op);
        self.generations.push(generation);
        self.receipts.push(receipt);
        self.applied.push(commit.applied.contains(&op));
        self.cancel.push(commit.cancellations.contains(&op));
    }
}

#[async_trait]
impl RoomStore for PgRooms {
    async fn listen(&self) -> Result<Option<Box<dyn agentroom_ports::RoomFeed>>, StoreError> {
        let feed = crate::listen::PgFeed::listen(&self.pool).await?;
        Ok(Some(Box::new(feed)))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %state.room()))]
    async fn create(&self, state: &RoomState, at: Timestamp) -> Result<Revision, StoreError> {
        let room = state.room();
        let creation = RoomHistory::create(state)?;
        let opening = state
            .ledger()
            .opening()
            .ok_or_else(|| StoreError::NotFresh(room.clone()))?;
        let ledger = to_json("the ledger", &[opening])?;
        let created: i64 = sqlx::query_scalar(sql::CREATE_ROOM)
            .bind(room.as_str())
            .bind(creation.snapshot())
            .bind(creation.snapshot_bytes())
            .bind(at.as_millis())
            .bind(&ledger)
            .fetch_one(&self.pool)
            .await
            .map_err(failed("creating a Room"))?;
        if created != 1 {
            return Err(StoreError::RoomExists(room.clone()));
        }
        self.history.created(room, creation);
        Ok(Revision::FIRST)
    }

    #[tracing::instrument(level = "debug", skip(self), fields(room = %room))]
    #[tracing::instrument(level = "debug", skip(self), fields(room = %room))]
    async fn revision(&self, room: &RoomId) -> Result<Option<Revision>, StoreError> {
        // Reads only: safe to run again on a fresh connection (held::Held::rerunnable).
        let revision: Option<i64> = self
            .held
            .rerunnable(|mut conn| async move {
                let row = sqlx::query_scalar(sql::ROOM_REVISION)
                    .bind(room.as_str())
                    .fetch_optional(&mut conn)
                    .await;
                (conn, row)
            })
            .await
            .map_err(failed("reading a Room's revision"))?;
        Ok(revision.map(Revision))
    }

    async fn load(&self, room: &RoomId) -> Result<Option<StoredRoom>, StoreError> {
        if let Some(known) = self.history.known(room)
            && let Some(stored) = self.catch_up(room, known).await?
        {
            return Ok(Some(stored));
        }
        // Reads only: safe to run again on a fresh connection (held::Held::rerunnable).
        let row: Option<(i64, i64, String, i64, i64, Vec<String>)> = self
            .held
            .rerunnable(|mut conn| async move {
                let row = sqlx::query_as(sql::LOAD_ROOM)
                    .bind(room.as_str())
                    .fetch_optional(&mut conn)
                    .await;
                (conn, row)
            })
            .await
            .map_err(failed("loading a Room"))?;
        let Some((revision, snapshot, state, snapshot_bytes, since, deltas)) = row else {
            return Ok(None);
        };
        let rebuilt = history::rebuild(
            room,
            Revision(snapshot),
            &state,
            Revision(revision),
            &deltas,
        )?;
        let weight = SnapshotWeight {
            since,
            snapshot_bytes,
        };
        let state = self
            .history
            .loaded(room, Revision(revision), rebuilt, Some(weight))?;
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
        // The delta of the sections the decision changed, from this process's document of
        // `expected` when it has one, and the state when a snapshot is due (ports::history).
        let staged = self.history.stage(room, expected, &commit)?;
        let statement = commit_statement(room, expected, &staged, &commit)?;
        if !commit.scrubs.is_empty() {
            // A redaction reserves, charges and releases nothing: its commit never moves a
            // pool. Refused rather than committed without the pool if that ever changes (B8).
            if commit.state.pool().is_some() && agentroom_domain::pool::moves_pool(&commit.ledger) {
                return Err(CommitError::Store(StoreError::inconsistent(
                    "a commit that redacts must not also move a budget pool",
                )));
            }
            let (revision, weight) = self
                .commit_with_scrubs(room, expected, &commit, statement)
                .await?;
            self.history.committed(room, revision, staged, Some(weight));
            if !commit.scrubs.texts.is_empty() {
                // Staged from the state before the scrubbed rows: rebuilt at the next load.
                self.history.forget(room);
            }
            return Ok(revision);
        }
        // Not rerunnable (held::Held::rerunnable): after a broken connection the commit may
        // have gone through; the caller's reload and compare-and-swap find out (D1).
        let mut lent = self
            .held
            .lend()
            .await
            .map_err(|e| CommitError::Store(failed("committing a Room")(e)))?;
        // B8: a decision that moves the pool the Room draws on commits with the pool's row,
        // in one transaction (the Room's row first); every other commit is the one statement.
        let pooled = commit
            .state
            .pool()
            .filter(|_| agentroom_domain::pool::moves_pool(&commit.ledger));
        let row: Result<Result<Option<CommitRow>, CommitError>, sqlx::Error> = match pooled {
            None => statement.fetch_optional(lent.conn()).await.map(Ok),
            Some(pool) => {
                async {
                    let mut tx = sqlx::Connection::begin(lent.conn()).await?;
                    let Some(row) = statement.fetch_optional(&mut *tx).await? else {
                        tx.rollback().await?;
                        return Ok(Ok(None));
                    };
                    let moved = follow_in(&mut tx, room, pool, &commit.ledger, commit.at).await?;
                    match moved {
                        Ok(Followed::Moved) => {
                            tx.commit().await?;
                            Ok(Ok(Some(row)))
                        }
                        Ok(Followed::Refused(reason)) => {
                            tx.rollback().await?;
                            Ok(Err(CommitError::PoolRefused {
                                room: room.clone(),
                                pool: pool.clone(),
                                reason,
                            }))
                        }
                        Err(err) => {
                            tx.rollback().await?;
                            Ok(Err(CommitError::Store(err)))
                        }
                    }
                }
                .await
            }
        };
        let row = match lent.finish(row) {
            Ok(Ok(row)) => row,
            Ok(Err(refused)) => return Err(refused),
            Err(error) => return Err(self.refusal(room, &commit, error)),
        };
        if let Some((revision, since, snapshot_bytes, _)) = row {
            let weight = SnapshotWeight {
                since,
                snapshot_bytes,
            };
            self.history
                .committed(room, Revision(revision), staged, Some(weight));
            return Ok(Revision(revision));
        }
        Err(self.not_committed(room, expected).await)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %room, expected = %expected, commits = commits.len()))]
    async fn commit_group(
        &self,
        room: &RoomId,
        expected: Revision,
        commits: Vec<Commit<'_>>,
    ) -> Result<Vec<Revision>, CommitError> {
        agentroom_ports::refuse_in_group(&commits)?;
        let staged = self.history.stage_group(room, expected, &commits)?;
        let mut statements = Vec::with_capacity(commits.len());
        let mut at = expected;
        for (commit, staged) in commits.iter().zip(&staged) {
            statements.push(commit_statement(room, at, staged, commit)?);
            at = at.next();
        }
        // Not rerunnable, like a single commit: the caller's reload finds out (D1).
        let mut lent = self
            .held
            .lend()
            .await
            .map_err(|e| CommitError::Store(failed("committing a group of decisions")(e)))?;
        // The member whose statement answered last: the one refused, when one is.
        let mut member = 0;
        let rows: Result<Option<Vec<CommitRow>>, sqlx::Error> = async {
            let mut tx = sqlx::Connection::begin(lent.conn()).await?;
            let mut rows = Vec::with_capacity(statements.len());
            for (i, statement) in statements.into_iter().enumerate() {
                member = i;
                match statement.fetch_optional(&mut *tx).await? {
                    Some(row) => {
                        rows.push(row);
                        if i == 0 {
                            agentroom_ports::rooms::inside_group();
                        }
                    }
                    None => {
                        tx.rollback().await?;
                        return Ok(None);
                    }
                }
            }
            tx.commit().await?;
            Ok(Some(rows))
        }
        .await;
        let rows = match lent.finish(rows) {
            Ok(Some(rows)) => rows,
            // A member after the first cannot lose the compare-and-swap to another writer
            // (the Room's row is locked by the first); the first can.
            Ok(None) => return Err(self.not_committed(room, expected).await),
            Err(error) => return Err(self.refusal(room, &commits[member], error)),
        };
        let mut revisions = Vec::with_capacity(rows.len());
        for (staged, (revision, since, snapshot_bytes, _)) in staged.into_iter().zip(rows) {
            let weight = SnapshotWeight {
                since,
                snapshot_bytes,
            };
            self.history
                .committed(room, Revision(revision), staged, Some(weight));
            revisions.push(Revision(revision));
        }
        Ok(revisions)
    }

    #[tracing::instrument(level = "debug", skip(self), fields(room = %room, revision = %revision))]
    async fn state_at(
        &self,
        room: &RoomId,
        revision: Revision,
    ) -> Result<Option<RoomState>, StoreError> {
        if let Some(state) = self.history.state_at(room, revision) {
            return state.map(Some);
        }
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
        history::rebuild(room, Revision(snapshot), &state, revision, &deltas)?
            .state()
            .map(Some)
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
        let corrupt = |e: agentroom_domain::ids::IdError| StoreError::corrupt("an id", e);
        rows.into_iter()
            .map(|(id, author, body)| {
                Ok(Event {
                    id: id
                        .parse()
                        .map_err(|e| StoreError::corrupt(format!("event id {id}"), e))?,
                    room: room.clone(),
                    author: PrincipalId::parse(&author).map_err(corrupt)?,
                    body: parse_json::<EventBody>("an event body", &body)?,
                })
            })
            .collect()
    }

    async fn input_decided(
        &self,
        room: &RoomId,
        input: InputId,
    ) -> Result<Option<Revision>, StoreError> {
        self.decided_input(room, input).await
    }

    async fn history(
        &self,
        room: &RoomId,
        after: Revision,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        self.history_after(room, after, limit).await
    }

    async fn delivered(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Delivered>, StoreError> {
        self.delivered_after(room, after, limit).await
    }

    async fn outbox_position(
        &self,
        room: &RoomId,
        id: NotificationId,
    ) -> Result<Option<OutboxPosition>, StoreError> {
        self.position_in_outbox(room, id).await
    }

    // Issue 7 (Rooms created while `serve` runs); its SQL is kept here, out of `sql`.
    async fn rooms(&self, after: Option<&RoomId>, limit: usize) -> Result<Vec<RoomId>, StoreError> {
        // Byte order (`COLLATE "C"`), whatever the database's collation, like every store.
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT room_id FROM rooms \
             WHERE $1::text IS NULL OR room_id COLLATE \"C\" > $1::text COLLATE \"C\" \
             ORDER BY room_id COLLATE \"C\" LIMIT $2",
        )
        .bind(after.map(RoomId::as_str))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(failed("listing rooms"))?;
        ids.iter()
            .map(|id| RoomId::parse(id).map_err(|e| StoreError::corrupt("a room id", e)))
            .collect()
    }

    async fn objective_record(
        &self,
        room: &RoomId,
        objective: ObjectiveId,
    ) -> Result<Option<ObjectiveRecord>, StoreError> {
        let text: Option<String> = sqlx::query_scalar(
            "SELECT record::text FROM objective_records \
             WHERE room_id = $1 AND objective_id = $2",
        )
        .bind(room.as_str())
        .bind(objective.to_string())
        .fetch_optional(&self.pool)
        .await
        .map_err(failed("reading a closed objective's record"))?;
        text.map(|t| parse_json("a closed objective's record", &t))
            .transpose()
    }

    async fn objective_records(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, ObjectiveRecord)>, StoreError> {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT seq, record::text FROM objective_records \
             WHERE room_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(room.as_str())
        .bind(after)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(failed("listing closed objectives' records"))?;
        rows.into_iter()
            .map(|(seq, text)| Ok((seq, parse_json("a closed objective's record", &text)?)))
            .collect()
    }

    async fn records_by(
        &self,
        room: &RoomId,
        key: &RecordKey,
    ) -> Result<Vec<ObjectiveRecord>, StoreError> {
        let texts: Vec<String> = sqlx::query_scalar(
            "SELECT r.record::text FROM objective_record_keys k \
             JOIN objective_records r \
               ON r.room_id = k.room_id AND r.objective_id = k.objective_id \
             WHERE k.room_id = $1 AND k.key = $2 ORDER BY r.seq",
        )
        .bind(room.as_str())
        .bind(key.text())
        .fetch_all(&self.pool)
        .await
        .map_err(failed("finding closed objectives' records"))?;
        texts
            .iter()
            .map(|t| parse_json("a closed objective's record", t))
            .collect()
    }
}

/// `text` as a JSON string holds it, without the quotes: what every stored document that
/// holds it as a string value contains (serde_json wrote them all).
fn json_inner(text: &str) -> Result<String, CommitError> {
    let quoted = json_text("a redacted memory text", text)?;
    Ok(quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(&quoted)
        .to_owned())
}

/// What the commit statement answers: the new revision, the delta bytes since the latest
/// snapshot and its size (none when the compare-and-swap did not match).
type CommitRow = (i64, i64, i64, Option<i64>);

/// The one statement of a commit, with everything it writes bound.
fn commit_statement<'q>(
    room: &'q RoomId,
    expected: Revision,
    staged: &'q Staged,
    commit: &'q Commit<'_>,
) -> Result<
    sqlx::query::QueryAs<'q, sqlx::Postgres, CommitRow, sqlx::postgres::PgArguments>,
    CommitError,
> {
    let operations = &commit.operations;
    let touched = Touched::of(commit)?;
    let mut parts = sql::CommitParts::default()
        .touching(touched.ops.len())
        .creating(operations.len())
        .appending(commit.ledger.len());
    parts.snapshot = staged.snapshot().is_some();
    parts.notifications = !commit.notifications.is_empty();
    parts.records = !commit.archived.is_empty();
    parts.contents = !commit.contents.is_empty();
    parts.event = commit.new_event.is_some();
    let keys: Vec<(RecordKey, ObjectiveId)> = commit
        .archived
        .iter()
        .flat_map(|r| RecordKey::of(r).into_iter().map(move |k| (k, r.id())))
        .collect();
    Ok(
        // The text is one of the fixed ones `commit_room` assembles from constants.
        sqlx::query_as(sqlx::AssertSqlSafe(sql::commit_room(parts)))
            .bind(room.as_str())
            .bind(expected.0)
            .bind(staged.delta())
            .bind(staged.delta_bytes())
            .bind(commit.input)
            .bind(commit.event.map(|e| e.to_string()))
            .bind(json_text("a decision log", commit.log)?)
            .bind(commit.at.as_millis())
            .bind(staged.snapshot())
            .bind(staged.snapshot_bytes())
            .bind(ids(operations.iter().map(|o| o.request.op)))
            .bind(json_texts(
                "an operation request",
                operations.iter().map(|o| &o.request),
            )?)
            .bind(
                operations
                    .iter()
                    .map(|o| o.lease.as_ref().map(|l| l.owner.as_str()))
                    .collect::<Vec<_>>(),
            )
            .bind(
                operations
                    .iter()
                    .map(|o| {
                        o.lease
                            .as_ref()
                            .map(|l| agentroom_ports::lease_millis(l.duration))
                    })
                    .collect::<Vec<_>>(),
            )
            .bind(
                operations
                    .iter()
                    .map(|o| commit.cancellations.contains(&o.request.op))
                    .collect::<Vec<_>>(),
            )
            .bind(ids(touched.ops.iter().copied()))
            .bind(touched.generations)
            .bind(touched.receipts)
            .bind(touched.applied)
            .bind(touched.cancel)
            .bind(json_texts("a ledger entry", &commit.ledger)?)
            .bind(
                commit
                    .notifications
                    .iter()
                    .map(|n| n.id.to_string())
                    .collect::<Vec<_>>(),
            )
            .bind(json_texts("a notification", &commit.notifications)?)
            .bind(commit.input_id.map(|i| i.to_string()))
            .bind(
                commit
                    .archived
                    .iter()
                    .map(|r| r.id().to_string())
                    .collect::<Vec<_>>(),
            )
            .bind(json_texts("a closed objective's record", commit.archived)?)
            .bind(keys.iter().map(|(k, _)| k.text()).collect::<Vec<_>>())
            .bind(
                keys.iter()
                    .map(|(_, id)| id.to_string())
                    .collect::<Vec<_>>(),
            )
            .bind(
                commit
                    .contents
                    .iter()
                    .map(|c| c.digest().as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                commit
                    .contents
                    .iter()
                    .map(NewContent::media_type)
                    .collect::<Vec<_>>(),
            )
            .bind(
                commit
                    .contents
                    .iter()
                    .map(NewContent::bytes)
                    .collect::<Vec<_>>(),
            )
            .bind(commit.new_event.map(|e| e.author.as_str()))
            .bind(commit.new_event.map(|e| e.body.kind().as_str()))
            .bind(
                commit
                    .new_event
                    .map(|e| json_text("an event body", &e.body))
                    .transpose()?,
            ),
    )
}

impl PgRooms {
    /// Why a commit statement that answered no row committed nothing: the Room moved, or
    /// there is none.
    async fn not_committed(&self, room: &RoomId, expected: Revision) -> CommitError {
        let reading = |e| CommitError::Store(failed("reading a Room's revision")(e));
        // Reads only: safe to run again on a fresh connection (held::Held::rerunnable).
        let actual: Result<Option<i64>, sqlx::Error> = self
            .held
            .rerunnable(|mut conn| async move {
                let actual = sqlx::query_scalar(sql::ROOM_REVISION)
                    .bind(room.as_str())
                    .fetch_optional(&mut conn)
                    .await;
                (conn, actual)
            })
            .await;
        match actual {
            Ok(Some(actual)) => CommitError::Conflict {
                room: room.clone(),
                expected,
                actual: Revision(actual),
            },
            Ok(None) => CommitError::UnknownRoom(room.clone()),
            Err(error) => reading(error),
        }
    }

    /// A commit that redacts (the rare path): the commit statement, then the removals of
    /// [`Commit::scrubs`], in one explicit transaction on a pooled connection, so the content
    /// and the texts leave the store exactly when the decision that redacted them commits.
    /// Answers the new revision and the snapshot weight the statement read.
    async fn commit_with_scrubs(
        &self,
        room: &RoomId,
        expected: Revision,
        commit: &Commit<'_>,
        statement: sqlx::query::QueryAs<'_, sqlx::Postgres, CommitRow, sqlx::postgres::PgArguments>,
    ) -> Result<(Revision, SnapshotWeight), CommitError> {
        let failing = |e| CommitError::Store(failed("committing a redaction")(e));
        let mut tx = self.pool.begin().await.map_err(failing)?;
        let row = match statement.fetch_optional(&mut *tx).await {
            Ok(row) => row,
            Err(error) => return Err(self.refusal(room, commit, error)),
        };
        let Some((revision, since, snapshot_bytes, _)) = row else {
            drop(tx);
            return Err(self.not_committed(room, expected).await);
        };
        for digest in &commit.scrubs.contents {
            sqlx::query(sql::DELETE_CONTENT)
                .bind(room.as_str())
                .bind(digest.as_str())
                .execute(&mut *tx)
                .await
                .map_err(failing)?;
        }
        if !commit.scrubs.texts.is_empty() {
            let needles = commit
                .scrubs
                .texts
                .iter()
                .map(|text| json_inner(text))
                .collect::<Result<Vec<_>, _>>()?;
            for (select, update) in [
                (sql::HISTORY_MENTIONING, sql::SCRUB_HISTORY),
                (sql::SNAPSHOTS_MENTIONING, sql::SCRUB_SNAPSHOT),
            ] {
                let rows: Vec<(i64, String)> = sqlx::query_as(select)
                    .bind(room.as_str())
                    .bind(&needles)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(failing)?;
                for (at, document) in rows {
                    if let Some(scrubbed) = scrub_memory_json(&document, &commit.scrubs.texts) {
                        sqlx::query(update)
                            .bind(room.as_str())
                            .bind(at)
                            .bind(scrubbed)
                            .execute(&mut *tx)
                            .await
                            .map_err(failing)?;
                    }
                }
            }
        }
        tx.commit().await.map_err(failing)?;
        let weight = SnapshotWeight {
            since,
            snapshot_bytes,
        };
        Ok((Revision(revision), weight))
    }

    /// The typed refusal a failed commit statement stands for, or the failure itself.
    fn refusal(&self, room: &RoomId, commit: &Commit<'_>, error: sqlx::Error) -> CommitError {
        let refusal = error.as_database_error().and_then(|db| {
            let pg = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
            match pg.code() {
                sql::FENCED_SQLSTATE => fenced(&commit.receipts, pg.detail()?),
                sql::UNIQUE_VIOLATION_SQLSTATE
                    if pg.constraint() == Some(sql::EVENT_ONCE_INDEX) =>
                {
                    Some(CommitError::AlreadyAccepted {
                        room: room.clone(),
                        event: commit.event?,
                    })
                }
                sql::UNIQUE_VIOLATION_SQLSTATE
                    if pg.constraint() == Some(sql::EVENTS_PRIMARY_KEY) =>
                {
                    Some(CommitError::EventStored {
                        room: room.clone(),
                        event: commit.new_event?.id,
                    })
                }
                sql::UNIQUE_VIOLATION_SQLSTATE
                    if pg.constraint() == Some(sql::INPUT_ONCE_INDEX) =>
                {
                    Some(CommitError::AlreadyDecided {
                        room: room.clone(),
                        input: commit.input_id?,
                    })
                }
                _ => None,
            }
        });
        refusal.unwrap_or_else(|| CommitError::Store(failed("committing a Room")(error)))
    }

    /// Loads a Room this process knows by applying only the deltas committed since; `None`
    /// when it is too far behind (or gone), so the caller loads from the latest snapshot.
    async fn catch_up(
        &self,
        room: &RoomId,
        known: Known,
    ) -> Result<Option<StoredRoom>, StoreError> {
        // Revision, snapshot bytes, delta bytes since it, the deltas (none when too far behind).
        type Since = (i64, i64, i64, Option<Vec<String>>);
        let since = known.revision().0;
        // Reads only: safe to run again on a fresh connection (held::Held::rerunnable).
        let row: Option<Since> = self
            .held
            .rerunnable(|mut conn| async move {
                let row = sqlx::query_as(sql::LOAD_ROOM_SINCE)
                    .bind(room.as_str())
                    .bind(since)
                    .bind(CATCH_UP_REVISIONS)
                    .fetch_optional(&mut conn)
                    .await;
                (conn, row)
            })
            .await
            .map_err(failed("loading a Room"))?;
        let Some((revision, snapshot_bytes, since, Some(deltas))) = row else {
            return Ok(None);
        };
        let weight = SnapshotWeight {
            since,
            snapshot_bytes,
        };
        let state =
            self.history
                .catch_up(room, known, Revision(revision), &deltas, Some(weight))?;
        Ok(state.map(|state| StoredRoom {
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
        let corrupt = |e: agentroom_domain::ids::IdError| StoreError::corrupt("an id", e);
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
                    room: RoomId::parse(&room).map_err(|e| StoreError::corrupt("a room id", e))?,
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
