-- Durable Room state (issue 4): rooms with compare-and-swap on their revision, history as
-- deltas with periodic snapshots (D1), persisted events (T1), operations with leases and
-- generations (B1, D2, D3), ledger entries (B7) and the notification outbox (T5).
-- Times named *_ms are milliseconds since the Unix epoch; lease times come from the
-- database's clock, never the caller's.

-- One row per Room: its revision is what a commit compares and swaps. The state itself is
-- not here: it is the nearest snapshot plus the deltas after it, so a commit writes only
-- what changed.
CREATE TABLE rooms (
    room_id     TEXT    PRIMARY KEY,
    revision    INTEGER NOT NULL CHECK (revision >= 1),
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- One row per revision: what changed from the revision before (a JSON delta; NULL for the
-- first revision, whose state is its snapshot), what was decided and why.
CREATE TABLE room_history (
    room_id     TEXT    NOT NULL REFERENCES rooms (room_id),
    revision    INTEGER NOT NULL,
    input       TEXT    NOT NULL,           -- the kind of input, e.g. event_accepted
    event_id    TEXT,                       -- the persisted event decided, if any
    delta       TEXT,                       -- JSON delta from revision - 1
    log         TEXT    NOT NULL,           -- JSON array of decision-log entries
    at_ms       INTEGER NOT NULL,           -- when it was decided
    PRIMARY KEY (room_id, revision)
) STRICT, WITHOUT ROWID;

-- The whole state at the first revision and then every 64th: a load reads the nearest one
-- and applies at most 63 deltas.
CREATE TABLE room_snapshots (
    room_id     TEXT    NOT NULL REFERENCES rooms (room_id),
    revision    INTEGER NOT NULL,
    state       TEXT    NOT NULL,           -- JSON RoomState
    PRIMARY KEY (room_id, revision)
) STRICT, WITHOUT ROWID;

-- Events are persisted before they are decided (T1), idempotent on their id.
CREATE TABLE room_events (
    event_id    TEXT    PRIMARY KEY,
    room_id     TEXT    NOT NULL,
    event       TEXT    NOT NULL,           -- JSON Event
    at_ms       INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- One row per provider call, created with the reservation that pays for it (B1). The lease
-- generation fences every write of a running call; a receipt is written once.
CREATE TABLE operations (
    op_key             INTEGER PRIMARY KEY,  -- creation order
    op_id              TEXT    NOT NULL UNIQUE,
    room_id            TEXT    NOT NULL REFERENCES rooms (room_id),
    request            TEXT    NOT NULL,     -- JSON CallRequest
    status             TEXT    NOT NULL CHECK (status IN ('in_flight', 'receipted', 'applied',
                                                          'uncertain', 'dead_letter', 'resolved')),
    lease_generation   INTEGER NOT NULL DEFAULT 0,
    lease_owner        TEXT,
    lease_expires_at   INTEGER,              -- ms, by the database clock
    cancel_requested   INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    receipt            TEXT,                 -- JSON Receipt, written once
    recovery_attempts  INTEGER NOT NULL DEFAULT 0,
    dead_letter_reason TEXT,
    resolution         TEXT,                 -- JSON Resolution
    created_ms         INTEGER NOT NULL,
    updated_ms         INTEGER NOT NULL
) STRICT;

-- Lists by status, and recovery: a claim reads the 'in_flight' range (the open calls only,
-- oldest first), never applied or settled operations.
CREATE INDEX operations_by_status ON operations (status, op_key);

-- The Room's budget ledger as rows, in order, with the revision that appended each.
CREATE TABLE ledger_entries (
    room_id     TEXT    NOT NULL REFERENCES rooms (room_id),
    seq         INTEGER NOT NULL,
    entry       TEXT    NOT NULL,           -- JSON LedgerEntry
    revision    INTEGER NOT NULL,
    PRIMARY KEY (room_id, seq)
) STRICT, WITHOUT ROWID;

-- Notifications leave through the outbox (T5): stored with the decision that made them,
-- idempotent on their stable id, delivered at least once.
CREATE TABLE outbox (
    outbox_key      INTEGER PRIMARY KEY,      -- creation order
    notification_id TEXT    NOT NULL UNIQUE,
    room_id         TEXT    NOT NULL REFERENCES rooms (room_id),
    body            TEXT    NOT NULL,         -- JSON Notification
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_ms      INTEGER NOT NULL,
    delivered_ms    INTEGER
) STRICT;

CREATE INDEX outbox_undelivered ON outbox (outbox_key) WHERE delivered_ms IS NULL;
