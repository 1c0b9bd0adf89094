//! Room state with compare-and-swap, its history, and persisted events.

use std::fmt;

use agentroom_domain::archive::{ObjectiveRecord, RecordKey};
use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::engine::{Decision, Effect, LogEntry, Notification};
use agentroom_domain::event::Event;
use agentroom_domain::ids::{
    EventId, InputId, NotificationId, ObjectiveId, OperationId, PoolId, RoomId, Timestamp,
};
use agentroom_domain::ledger::LedgerEntry;
use agentroom_domain::redaction::Scrubs;
use agentroom_domain::state::RoomState;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::{BoxError, Cause};
use crate::workflows::{LeaseGrant, NewOperation, Receipt};

/// A Room's revision: 1 when created, +1 per commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Revision(pub i64);

impl Revision {
    /// The revision a new Room starts at.
    pub const FIRST: Revision = Revision(1);

    /// The one after this.
    pub fn next(self) -> Revision {
        Revision(self.0.saturating_add(1))
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A Room as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRoom {
    /// Its state.
    pub state: RoomState,
    /// Its revision.
    pub revision: Revision,
}

impl StoredRoom {
    /// This Room with `records` of closed objectives put back: a read view, never decided on
    /// nor committed ([`RoomState::with_records`]).
    #[must_use]
    pub fn with_records(self, records: impl IntoIterator<Item = ObjectiveRecord>) -> Self {
        StoredRoom {
            state: self.state.with_records(records),
            revision: self.revision,
        }
    }
}

/// A storage failure. The variants that stand for a failure below the store keep the error
/// they came from as their `source()` (and show it after their context).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database is not migrated to what this binary expects (D5).
    #[error("the database is not migrated ({context}{}); run `agentroom migrate up` first", Cause(.source))]
    NotMigrated {
        /// What is missing or differs.
        context: String,
        /// The database's error that showed it, if one did (a missing table under a running
        /// store).
        #[source]
        source: Option<BoxError>,
    },
    /// The database failed (connection lost, timeout, …); the caller may retry.
    #[error("database: {context}: {source}")]
    Database {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// Something stored cannot be read back.
    #[error("stored data cannot be read: {context}{}", Cause(.source))]
    Corrupt {
        /// What could not be read.
        context: String,
        /// The parser's error, if one failed (none when the data breaks an invariant).
        #[source]
        source: Option<BoxError>,
    },
    /// A Room with that id exists already.
    #[error("room {0} exists already")]
    RoomExists(RoomId),
    /// A Room is created from a state with an untouched ledger (nothing reserved, charged or
    /// stopped): its ledger rows start with the opening at its limit.
    #[error("room {0} cannot be created from a state whose ledger holds reservations or charges")]
    NotFresh(RoomId),
    /// An event with that id was stored with other content.
    #[error("event {0} was stored with other content")]
    EventMismatch(EventId),
    /// A pool with that id exists already.
    #[error("pool {0} exists already")]
    PoolExists(PoolId),
}

impl StoreError {
    /// The database failed while doing `context`.
    pub fn database(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Database {
            context: context.into(),
            source: source.into(),
        }
    }

    /// `context` cannot be read back: `source` failed to parse it.
    pub fn corrupt(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Corrupt {
            context: context.into(),
            source: Some(source.into()),
        }
    }

    /// Stored data breaks an invariant (`context` says which); no parser failed.
    pub fn inconsistent(context: impl Into<String>) -> Self {
        Self::Corrupt {
            context: context.into(),
            source: None,
        }
    }

    /// The schema is not this binary's: `context` says what differs.
    pub fn not_migrated(context: impl Into<String>) -> Self {
        Self::NotMigrated {
            context: context.into(),
            source: None,
        }
    }
}

/// Why a commit changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// Another writer moved the Room: reload, decide again.
    #[error("room {room} is at revision {actual}, the commit expected {expected}")]
    Conflict {
        /// The Room.
        room: RoomId,
        /// What the commit expected.
        expected: Revision,
        /// What is stored.
        actual: Revision,
    },
    /// A receipt's lease generation is no longer current (or it has a receipt already): the
    /// result is dropped and nothing is written.
    #[error("operation {op} is fenced: its lease generation {generation} is no longer current")]
    Fenced {
        /// The operation.
        op: OperationId,
        /// The generation the receipt carried.
        generation: i64,
    },
    /// No such Room.
    #[error("no room {0}")]
    UnknownRoom(RoomId),
    /// The event's acceptance was committed before (T1: each persisted event is accepted once
    /// per Room); nothing was written.
    #[error("event {event} was already accepted in room {room}")]
    AlreadyAccepted {
        /// The Room.
        room: RoomId,
        /// The event.
        event: EventId,
    },
    /// The store failed; nothing or everything was written — reload to learn which.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// B8: the pool the Room draws on cannot hold what the decision reserves (or there is
    /// no such pool): nothing was written. The pool moved since the decision read it:
    /// reload it, decide again.
    #[error("pool {pool} refused the commit of room {room}: {reason}")]
    PoolRefused {
        /// The Room.
        room: RoomId,
        /// The pool.
        pool: PoolId,
        /// Why.
        reason: String,
    },
    /// The event a commit was to persist and accept ([`Commit::new_event`]) is stored
    /// already, under its id (persisted before, by a retry or another process): nothing was
    /// written. The caller persists it the other way ([`RoomStore::append_event`], which
    /// refuses other content under the id) and accepts it.
    #[error("event {event} is stored already in room {room}")]
    EventStored {
        /// The Room.
        room: RoomId,
        /// The event.
        event: EventId,
    },
    /// A decision of this operator input was committed before (each input id is decided
    /// once per Room); nothing was written. [`RoomStore::input_decided`] finds its revision.
    #[error("input {input} was already decided in room {room}")]
    AlreadyDecided {
        /// The Room.
        room: RoomId,
        /// The input.
        input: InputId,
    },
}

/// Everything one decision writes, committed in one transaction.
#[derive(Debug, Clone)]
pub struct Commit<'a> {
    /// The state the decision started from (the stored state at the expected revision).
    pub previous: &'a RoomState,
    /// The new state.
    pub state: &'a RoomState,
    /// When it was decided.
    pub at: Timestamp,
    /// What was decided: the kind of input (for history), e.g. `event_accepted`.
    pub input: &'a str,
    /// The persisted event it accepted, if any: committed once per Room (T1).
    pub event: Option<EventId>,
    /// The event it accepts, when this commit also persists it (issue 21: an owner message
    /// persisted by the process that decides it is accepted in the same commit). A store
    /// writes it with the decision, all or nothing, and refuses with
    /// [`CommitError::EventStored`] when its id is stored already. Its id is `event`'s.
    pub new_event: Option<&'a Event>,
    /// The decision log (rules applied and rejections).
    pub log: &'a [LogEntry],
    /// Operations to create (B1: the reservation and the operation in one transaction),
    /// idempotent on their ids.
    pub operations: Vec<NewOperation>,
    /// Receipts to write, fenced on their lease generation.
    pub receipts: Vec<(OperationId, i64, Receipt)>,
    /// Operations whose receipt this decision applied to the state.
    pub applied: Vec<OperationId>,
    /// Operations asked to abort cooperatively (D3).
    pub cancellations: Vec<OperationId>,
    /// Ledger entries this decision appended, stored as the Room's next ledger rows (B7).
    pub ledger: Vec<LedgerEntry>,
    /// Notifications to deliver through the outbox (T5), idempotent on their ids.
    pub notifications: Vec<Notification>,
    /// The operator input it decided, if any: committed once per Room, like an event (a
    /// second commit of it is [`CommitError::AlreadyDecided`]).
    pub input_id: Option<InputId>,
    /// What a redaction removes in the same transaction: the content rows of the Room it
    /// names, and the memory texts it redacted, scrubbed from every stored delta and snapshot
    /// of the Room ([`crate::scrub`]). Empty for every other decision (the rare path).
    pub scrubs: Scrubs,
    /// The closed objectives the decision moved out of the live state: their records are
    /// kept in the same transaction, each with its [`RecordKey`]s (issue 21).
    pub archived: &'a [ObjectiveRecord],
    /// Content the decision's input carries (a contribution's body, sources and outputs),
    /// kept in the same transaction under its digest; content the Room holds already is not
    /// written again (issue 21: one commit per transition, not one per piece before it).
    pub contents: Vec<NewContent>,
}

/// Content a commit keeps in its Room, addressed by the SHA-256 of its bytes (computed here,
/// never taken from a caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewContent {
    digest: ContentDigest,
    media_type: String,
    bytes: Vec<u8>,
}

impl NewContent {
    /// `bytes`, read as `media_type`.
    pub fn new(media_type: impl Into<String>, bytes: Vec<u8>) -> Self {
        Self {
            digest: ContentDigest::of(&bytes),
            media_type: media_type.into(),
            bytes,
        }
    }
    /// Its address.
    pub fn digest(&self) -> &ContentDigest {
        &self.digest
    }
    /// How to read it.
    pub fn media_type(&self) -> &str {
        &self.media_type
    }
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl<'a> Commit<'a> {
    /// A commit of `state` after `previous` that writes nothing else.
    pub fn state(
        previous: &'a RoomState,
        state: &'a RoomState,
        at: Timestamp,
        input: &'a str,
    ) -> Self {
        Self {
            previous,
            state,
            at,
            input,
            event: None,
            new_event: None,
            log: &[],
            operations: Vec::new(),
            receipts: Vec::new(),
            applied: Vec::new(),
            cancellations: Vec::new(),
            ledger: Vec::new(),
            notifications: Vec::new(),
            input_id: None,
            scrubs: Scrubs::default(),
            archived: &[],
            contents: Vec::new(),
        }
    }
}

impl<'a> Commit<'a> {
    /// Everything `decision` writes: its state, log, new ledger entries, the operations its
    /// `ReserveAndCall` effects create (with `lease` for the committer), its cancellations
    /// and notifications.
    pub fn decided(
        room: &RoomId,
        previous: &'a RoomState,
        decision: &'a Decision,
        at: Timestamp,
        input: &'a str,
        lease: Option<&LeaseGrant>,
    ) -> Self {
        let mut commit = Commit::state(previous, &decision.state, at, input);
        commit.log = &decision.log;
        commit.event = decision.event;
        commit.ledger = decision.ledger.clone();
        commit.scrubs = Scrubs::between(previous, &decision.state);
        commit.archived = &decision.archived;
        for effect in &decision.effects {
            match effect {
                Effect::ReserveAndCall(request) => commit.operations.push(NewOperation {
                    room: room.clone(),
                    request: request.clone(),
                    lease: lease.cloned(),
                }),
                Effect::CancelCall { op } => commit.cancellations.push(*op),
                Effect::Notify(notification) => commit.notifications.push(notification.clone()),
                Effect::StopForAttention { .. } => {}
            }
        }
        commit
    }
}

/// Refuses a group ([`RoomStore::commit_group`]) that holds a commit that must be committed
/// alone: one that redacts (its removals follow the rows it scrubs) or moves a budget pool
/// (B8: the pool's row follows each decision that read it), or an empty group.
pub fn refuse_in_group(commits: &[Commit<'_>]) -> Result<(), CommitError> {
    if commits.is_empty() {
        return Err(CommitError::Store(StoreError::inconsistent(
            "a group of commits must hold at least one",
        )));
    }
    let alone = commits.iter().any(|commit| {
        !commit.scrubs.is_empty()
            || (commit.state.pool().is_some() && agentroom_domain::pool::moves_pool(&commit.ledger))
    });
    if alone {
        return Err(CommitError::Store(StoreError::inconsistent(
            "a commit that redacts or moves a budget pool is committed alone, not in a group",
        )));
    }
    Ok(())
}

/// What a store runs inside a group's transaction once its first member is written
/// ([`inside_group`]): none unless a process sets one ([`on_inside_group`]).
static INSIDE_GROUP: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what every store of this process runs inside a group's transaction once its first
/// member is written and before the next: the crash tests' SIGKILL there (issue 21, a process
/// killed inside a merged commit). The first call sets it; later ones change nothing.
pub fn on_inside_group(hook: fn()) {
    let _ = INSIDE_GROUP.set(hook);
}

/// Runs what [`on_inside_group`] set, if anything: a store calls it inside a group's
/// transaction, after its first member's rows.
pub fn inside_group() {
    if let Some(hook) = INSIDE_GROUP.get() {
        hook();
    }
}

/// Whether appending an event stored it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventAppend {
    /// Stored now.
    Inserted,
    /// The same event was stored before.
    Existed,
}

/// One history row as read back: what a commit decided and why (its delta stays behind).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    /// The revision the commit made.
    pub revision: Revision,
    /// The kind of input decided (`create` for revision 1).
    pub input: String,
    /// The persisted event it accepted, if any (T1).
    pub event: Option<EventId>,
    /// The operator input it decided, if any.
    pub input_id: Option<InputId>,
    /// The decision log.
    pub log: Vec<LogEntry>,
    /// When it was decided.
    pub at: Timestamp,
}

/// A notification the outbox delivered, at its place in the Room's delivery order.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    /// Its position: positive, increasing in the order the Room's notifications were marked
    /// delivered, never reused.
    pub position: i64,
    /// The notification.
    pub notification: Notification,
}

/// Where a notification of a Room is in the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxPosition {
    /// Stored, not delivered yet.
    Undelivered,
    /// Delivered, at this position.
    Delivered(i64),
}

/// What a store's change feed said (issue 21: Room changes reach other processes by
/// notification rather than per-Room polling).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoomSignal {
    /// These Rooms had an event persisted, or were created, somewhere (this process or
    /// another), in no particular order and without duplicates.
    Changed(Vec<RoomId>),
    /// The feed lost its connection: notices may have been missed, so look at every Room.
    Missed,
}

/// A store's feed of Room changes (PostgreSQL: LISTEN/NOTIFY), which a host waits on instead
/// of polling every Room. Advisory: a host still passes over every Room now and then.
#[async_trait]
pub trait RoomFeed: Send {
    /// Waits for the next notice, and takes with it those already arrived.
    async fn next(&mut self) -> RoomSignal;
}

/// Room state, history and events.
#[async_trait]
pub trait RoomStore: Send + Sync {
    /// A feed of Room changes made through this store's database by any process, when the
    /// store has one (the default: none, and a host polls).
    async fn listen(&self) -> Result<Option<Box<dyn RoomFeed>>, StoreError> {
        Ok(None)
    }

    /// Stores a new Room at [`Revision::FIRST`], with its ledger's opening as the first
    /// ledger row ([`StoreError::NotFresh`] when its ledger was already used).
    async fn create(&self, state: &RoomState, at: Timestamp) -> Result<Revision, StoreError>;

    /// A Room's current state and revision.
    async fn load(&self, room: &RoomId) -> Result<Option<StoredRoom>, StoreError>;

    /// A Room's current revision, without its state: what a host that holds the state of a
    /// revision asks to know that it is still the Room as stored now (T3 at the call sink).
    /// The default loads the state.
    async fn revision(&self, room: &RoomId) -> Result<Option<Revision>, StoreError> {
        Ok(self.load(room).await?.map(|stored| stored.revision))
    }

    /// Commits `commit` if the Room is still at `expected`; returns the new revision.
    async fn commit(
        &self,
        room: &RoomId,
        expected: Revision,
        commit: Commit<'_>,
    ) -> Result<Revision, CommitError>;

    /// Commits `commits` as one transaction (issue 21, group decisions): the first at
    /// `expected`, each next at the revision the one before made, each its own history row;
    /// all of them or none. Returns their revisions in order. Every rule of a single commit
    /// holds for each member (T1, D2, D3, T5, B1). A commit that redacts or moves a budget
    /// pool is committed alone ([`refuse_in_group`]).
    async fn commit_group(
        &self,
        room: &RoomId,
        expected: Revision,
        commits: Vec<Commit<'_>>,
    ) -> Result<Vec<Revision>, CommitError>;

    /// The state the Room had at `revision`, rebuilt from history (D1).
    async fn state_at(
        &self,
        room: &RoomId,
        revision: Revision,
    ) -> Result<Option<RoomState>, StoreError>;

    /// The Room's ledger entries as rows, in order.
    async fn ledger(&self, room: &RoomId) -> Result<Vec<LedgerEntry>, StoreError>;

    /// Persists an event before it is decided (T1); idempotent on its id.
    async fn append_event(&self, event: &Event, at: Timestamp) -> Result<EventAppend, StoreError>;

    /// A persisted event of the Room.
    async fn event(&self, room: &RoomId, id: EventId) -> Result<Option<Event>, StoreError>;

    /// Up to `limit` persisted events of the Room whose acceptance was never committed, in
    /// the order they were persisted: what a coordinator accepts on start when a process died
    /// between persisting an event and accepting it (T1).
    async fn unaccepted_events(
        &self,
        room: &RoomId,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError>;

    /// The revision whose commit decided operator input `input` in `room`, if one did.
    async fn input_decided(
        &self,
        room: &RoomId,
        input: InputId,
    ) -> Result<Option<Revision>, StoreError>;

    /// Up to `limit` history rows of `room` after revision `after`, in revision order.
    async fn history(
        &self,
        room: &RoomId,
        after: Revision,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, StoreError>;

    /// Up to `limit` notifications of `room` the outbox delivered (marked delivered) after
    /// position `after` (0: from the first), in delivery order.
    async fn delivered(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Delivered>, StoreError>;

    /// Where notification `id` of `room` is in the outbox (`None`: not a notification of it).
    async fn outbox_position(
        &self,
        room: &RoomId,
        id: NotificationId,
    ) -> Result<Option<OutboxPosition>, StoreError>;

    /// Up to `limit` Rooms of the store by id (byte order), after `after` when given: what a
    /// host coordinating every Room pages through to find the Rooms created since it started.
    async fn rooms(&self, after: Option<&RoomId>, limit: usize) -> Result<Vec<RoomId>, StoreError>;

    /// The record of closed objective `objective` of `room`, once it left the live state.
    async fn objective_record(
        &self,
        room: &RoomId,
        objective: ObjectiveId,
    ) -> Result<Option<ObjectiveRecord>, StoreError>;

    /// Up to `limit` records of `room` in the order they left the live state, after position
    /// `after` (0: from the first), each with its position.
    async fn objective_records(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, ObjectiveRecord)>, StoreError>;

    /// The records of `room` found by `key`.
    async fn records_by(
        &self,
        room: &RoomId,
        key: &RecordKey,
    ) -> Result<Vec<ObjectiveRecord>, StoreError>;

    /// Every record of `room`, in the order they left the live state, read a page at a time:
    /// what a view of the Room's whole past reads ([`StoredRoom::with_records`]).
    async fn all_objective_records(
        &self,
        room: &RoomId,
    ) -> Result<Vec<ObjectiveRecord>, StoreError> {
        const PAGE: usize = 256;
        let mut records = Vec::new();
        let mut after = 0;
        loop {
            let page = self.objective_records(room, after, PAGE).await?;
            let full = page.len() == PAGE;
            for (position, record) in page {
                after = after.max(position);
                records.push(record);
            }
            if !full {
                return Ok(records);
            }
        }
    }
}
