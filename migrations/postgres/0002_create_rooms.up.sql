-- Durable Room state (issue 4): Rooms with compare-and-swap on their revision, history as
-- deltas with snapshots, persisted events, operations with leases and generations, the
-- budget ledger as rows, and the notification outbox. One commit is one call of
-- room_commit(jsonb): one statement, one round trip, one transaction (D1, B1, B7, T5).
-- Lease times come from the database clock (clock_timestamp()), never the caller's (D3).

-- One row per Room: its current revision and where its latest snapshot is.
CREATE TABLE rooms (
    room_id              text        PRIMARY KEY,
    revision             bigint      NOT NULL CHECK (revision >= 1),
    -- The latest snapshot (always at least revision 1, the creation).
    snapshot_revision    bigint      NOT NULL CHECK (snapshot_revision BETWEEN 1 AND revision),
    -- Its size, and the delta bytes committed since: the committer writes a new snapshot
    -- once the deltas since outweigh it, so a load reads at most about twice the state and
    -- snapshots cost at most about as much as the deltas they summarize.
    snapshot_bytes       bigint      NOT NULL CHECK (snapshot_bytes >= 0),
    bytes_since_snapshot bigint      NOT NULL CHECK (bytes_since_snapshot >= 0),
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at           timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per accepted revision: what changed from the previous revision (an
-- agentroom_ports::Delta; revision 1 replaces the empty document with the created state),
-- what was decided and why. Every revision is rebuilt from these rows alone (D1).
CREATE TABLE room_history (
    room_id   text   NOT NULL REFERENCES rooms (room_id),
    revision  bigint NOT NULL CHECK (revision >= 1),
    -- The kind of input decided, e.g. `event_accepted` (`create` for revision 1).
    input     text   NOT NULL,
    -- The persisted event it decided, if any (T1).
    event_id  uuid   NULL,
    delta     jsonb  NOT NULL,
    -- The decision log: rules applied and rejections.
    log       jsonb  NOT NULL CHECK (jsonb_typeof(log) = 'array'),
    at_ms     bigint NOT NULL,
    PRIMARY KEY (room_id, revision)
);

-- Whole states at some revisions: a cache that bounds a load; history alone is the truth.
CREATE TABLE room_snapshots (
    room_id  text   NOT NULL REFERENCES rooms (room_id),
    revision bigint NOT NULL,
    state    jsonb  NOT NULL CHECK (jsonb_typeof(state) = 'object'),
    PRIMARY KEY (room_id, revision)
);

-- Persisted events (T1), idempotent on their id.
CREATE TABLE room_events (
    event_id uuid   PRIMARY KEY,
    room_id  text   NOT NULL,
    author   text   NOT NULL,
    kind     text   NOT NULL,
    body     jsonb  NOT NULL,
    at_ms    bigint NOT NULL
);

-- One row per provider call (B1), created in the commit that reserves it, idempotent on its
-- deterministic id. Every write of a running call is fenced on lease_generation.
CREATE TABLE operations (
    op_id              uuid        PRIMARY KEY,
    -- Creation order, for "oldest first".
    seq                bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    room_id            text        NOT NULL REFERENCES rooms (room_id),
    request            jsonb       NOT NULL,
    status             text        NOT NULL CHECK (status IN
                           ('in_flight', 'receipted', 'applied', 'uncertain', 'dead_letter',
                            'resolved')),
    -- 0 before any lease; +1 per lease taken.
    lease_generation   bigint      NOT NULL CHECK (lease_generation >= 0),
    lease_owner        text        NULL,
    -- By the database clock (D3); NULL when no lease was ever taken.
    lease_expires_at   timestamptz NULL,
    cancel_requested   boolean     NOT NULL DEFAULT false,
    receipt            jsonb       NULL,
    recovery_attempts  integer     NOT NULL DEFAULT 0 CHECK (recovery_attempts >= 0),
    dead_letter_reason text        NULL,
    resolution         jsonb       NULL,
    created_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at         timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- claim_expired: in-flight operations by lease expiry.
CREATE INDEX operations_claimable ON operations (lease_expires_at NULLS FIRST, seq)
    WHERE status = 'in_flight';
-- Listing by status, oldest first.
CREATE INDEX operations_status ON operations (status, seq);

-- The budget ledger as rows: the Room's ledger entries in order, with the revision that
-- appended them; they replay to the stored balances (BudgetLedger::replay).
CREATE TABLE ledger_entries (
    room_id  text   NOT NULL REFERENCES rooms (room_id),
    seq      bigint NOT NULL CHECK (seq >= 0),
    revision bigint NOT NULL,
    entry    jsonb  NOT NULL,
    PRIMARY KEY (room_id, seq)
);

-- The notification outbox (T5): stored with the decision that made it, delivered at least
-- once, deduplicated on its stable id.
CREATE TABLE outbox (
    notification_id uuid        PRIMARY KEY,
    seq             bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    room_id         text        NOT NULL REFERENCES rooms (room_id),
    revision        bigint      NOT NULL,
    body            jsonb       NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    delivered_at    timestamptz NULL
);

CREATE INDEX outbox_undelivered ON outbox (seq) WHERE delivered_at IS NULL;

-- One commit (agentroom_ports::RoomStore::commit), all or nothing, in one call. `c` holds:
--   room, expected (revision), delta (jsonb), delta_bytes, input, event (uuid or null),
--   log (array), at (ms), ledger_from (the seq of the first ledger entry), ledger (array),
--   operations (array of {op, request, lease_owner, lease_ms}), receipts (array of
--   {op, generation, receipt}), applied and cancellations (arrays of uuids),
--   notifications (array of {id, ...}), and optionally snapshot + snapshot_bytes.
-- Returns outcome 'committed' with the new revision, 'conflict' with the stored revision, or
-- 'unknown_room'; those two write nothing. A fenced receipt raises SQLSTATE AR001 (DETAIL
-- `<op> <generation>`), which rolls the whole statement back.
CREATE FUNCTION room_commit(c jsonb)
RETURNS TABLE (outcome text, revision bigint, bytes_since_snapshot bigint, snapshot_bytes bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_room     text   := c->>'room';
    v_expected bigint := (c->>'expected')::bigint;
    v_next     bigint := (c->>'expected')::bigint + 1;
    v_snapshot boolean := c ? 'snapshot';
    v_actual   bigint;
    v_since    bigint;
    v_bytes    bigint;
    v_fenced   record;
BEGIN
    -- Compare-and-swap on the revision (D1): the first write, so a conflict writes nothing.
    UPDATE rooms r
    SET revision = v_next,
        snapshot_revision = CASE WHEN v_snapshot THEN v_next ELSE r.snapshot_revision END,
        snapshot_bytes = CASE WHEN v_snapshot THEN (c->>'snapshot_bytes')::bigint
                              ELSE r.snapshot_bytes END,
        bytes_since_snapshot = CASE WHEN v_snapshot THEN 0
                                    ELSE r.bytes_since_snapshot + (c->>'delta_bytes')::bigint END,
        updated_at = clock_timestamp()
    WHERE r.room_id = v_room AND r.revision = v_expected
    RETURNING r.bytes_since_snapshot, r.snapshot_bytes INTO v_since, v_bytes;
    IF NOT FOUND THEN
        SELECT r.revision INTO v_actual FROM rooms r WHERE r.room_id = v_room;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'unknown_room'::text, NULL::bigint, NULL::bigint, NULL::bigint;
        ELSE
            RETURN QUERY SELECT 'conflict'::text, v_actual, NULL::bigint, NULL::bigint;
        END IF;
        RETURN;
    END IF;

    INSERT INTO room_history (room_id, revision, input, event_id, delta, log, at_ms)
    VALUES (v_room, v_next, c->>'input', (c->>'event')::uuid, c->'delta', c->'log',
            (c->>'at')::bigint);

    IF v_snapshot THEN
        INSERT INTO room_snapshots (room_id, revision, state)
        VALUES (v_room, v_next, c->'snapshot');
    END IF;

    -- New operations with the committer's lease (B1), idempotent on their ids.
    IF jsonb_array_length(c->'operations') > 0 THEN
        INSERT INTO operations (op_id, room_id, request, status, lease_generation, lease_owner,
                                lease_expires_at)
        SELECT x.op, v_room, x.request, 'in_flight',
               CASE WHEN x.lease_owner IS NULL THEN 0 ELSE 1 END,
               x.lease_owner,
               CASE WHEN x.lease_owner IS NULL THEN NULL
                    ELSE clock_timestamp() + x.lease_ms * interval '1 millisecond' END
        FROM jsonb_to_recordset(c->'operations')
             AS x(op uuid, request jsonb, lease_owner text, lease_ms bigint)
        ON CONFLICT (op_id) DO NOTHING;
    END IF;

    -- Receipts, fenced on the lease generation and written once: one fenced receipt
    -- aborts the whole commit.
    IF jsonb_array_length(c->'receipts') > 0 THEN
        WITH wanted AS (
            SELECT x.op, x.generation, x.receipt
            FROM jsonb_to_recordset(c->'receipts') AS x(op uuid, generation bigint, receipt jsonb)
        ), written AS (
            UPDATE operations o
            SET receipt = w.receipt, status = 'receipted', updated_at = clock_timestamp()
            FROM wanted w
            WHERE o.op_id = w.op AND o.room_id = v_room AND o.lease_generation = w.generation
              AND o.status = 'in_flight' AND o.receipt IS NULL
            RETURNING o.op_id
        )
        SELECT w.op, w.generation INTO v_fenced
        FROM wanted w
        WHERE w.op NOT IN (SELECT op_id FROM written)
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'operation % is fenced at generation %', v_fenced.op, v_fenced.generation
                USING ERRCODE = 'AR001', DETAIL = v_fenced.op || ' ' || v_fenced.generation;
        END IF;
    END IF;

    IF jsonb_array_length(c->'applied') > 0 THEN
        UPDATE operations o
        SET status = 'applied', updated_at = clock_timestamp()
        WHERE o.room_id = v_room
          AND o.op_id IN (SELECT a::uuid FROM jsonb_array_elements_text(c->'applied') a);
    END IF;

    IF jsonb_array_length(c->'cancellations') > 0 THEN
        UPDATE operations o
        SET cancel_requested = true, updated_at = clock_timestamp()
        WHERE o.room_id = v_room
          AND o.op_id IN (SELECT a::uuid FROM jsonb_array_elements_text(c->'cancellations') a);
    END IF;

    IF jsonb_array_length(c->'ledger') > 0 THEN
        INSERT INTO ledger_entries (room_id, seq, revision, entry)
        SELECT v_room, (c->>'ledger_from')::bigint + e.ord - 1, v_next, e.value
        FROM jsonb_array_elements(c->'ledger') WITH ORDINALITY AS e(value, ord);
    END IF;

    IF jsonb_array_length(c->'notifications') > 0 THEN
        INSERT INTO outbox (notification_id, room_id, revision, body)
        SELECT (n->>'id')::uuid, v_room, v_next, n
        FROM jsonb_array_elements(c->'notifications') n
        ON CONFLICT (notification_id) DO NOTHING;
    END IF;

    RETURN QUERY SELECT 'committed'::text, v_next, v_since, v_bytes;
END;
$fn$;
