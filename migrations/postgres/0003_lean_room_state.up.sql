-- Lean Room state (issue 4): the live state holds open work only. Ledger entries and closed
-- operations leave it with the decision that made them, so a commit costs what it changed,
-- not what the Room has done; and an event's acceptance is committed once per Room (T1),
-- which the store guarantees instead of a set of every event id in the state.
--
-- room_commit numbers a commit's ledger rows after the Room's last row (it no longer reads
-- `ledger_from`, which a state without its entries cannot know), refuses a second
-- acceptance of an event with SQLSTATE AR002 (DETAIL: the event id), writing nothing, and
-- reaches receipted, applied and cancelled operations by their primary key (0002's joins
-- against a set-returning function let the planner scan the whole operations table, a cost
-- that grew with every call the database ever made).

CREATE UNIQUE INDEX room_history_event_once ON room_history (room_id, event_id)
    WHERE event_id IS NOT NULL;

-- A Room's persisted events in the order they were persisted: a coordinator starting up
-- accepts those no history row records (T1), without reading other Rooms' events.
CREATE INDEX room_events_by_room ON room_events (room_id, at_ms, event_id);

-- The whole function, restated from 0002 with the changes above (a migration that
-- replaces a function has to restate it).
CREATE OR REPLACE FUNCTION room_commit(c jsonb)
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
    v_receipt  record;
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

    -- T1: an event is accepted once per Room. Checked under the Room row's lock, which the
    -- compare-and-swap above holds, so no concurrent commit of this Room can race it; the
    -- unique index is the backstop. Raising rolls back the compare-and-swap too.
    IF c->>'event' IS NOT NULL AND EXISTS (
        SELECT 1 FROM room_history h
        WHERE h.room_id = v_room AND h.event_id = (c->>'event')::uuid
    ) THEN
        RAISE EXCEPTION 'event % was already accepted in room %', c->>'event', v_room
            USING ERRCODE = 'AR002', DETAIL = c->>'event';
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
    -- aborts the whole commit. One primary-key update each, never a scan of the table.
    FOR v_receipt IN
        SELECT x.op, x.generation, x.receipt
        FROM jsonb_to_recordset(c->'receipts') AS x(op uuid, generation bigint, receipt jsonb)
    LOOP
        -- A receipt the same decision applies goes straight to `applied`: one row version
        -- (status is indexed, so each status change writes every index of the row again).
        UPDATE operations o
        SET receipt = v_receipt.receipt,
            status = CASE WHEN c->'applied' ? v_receipt.op::text THEN 'applied'
                          ELSE 'receipted' END,
            updated_at = clock_timestamp()
        WHERE o.op_id = v_receipt.op AND o.room_id = v_room
          AND o.lease_generation = v_receipt.generation
          AND o.status = 'in_flight' AND o.receipt IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'operation % is fenced at generation %', v_receipt.op,
                  v_receipt.generation
                USING ERRCODE = 'AR001', DETAIL = v_receipt.op || ' ' || v_receipt.generation;
        END IF;
    END LOOP;

    IF jsonb_array_length(c->'applied') > 0 THEN
        UPDATE operations o
        SET status = 'applied', updated_at = clock_timestamp()
        WHERE o.op_id = ANY (ARRAY(SELECT jsonb_array_elements_text(c->'applied'))::uuid[])
          AND o.room_id = v_room AND o.status <> 'applied';
    END IF;

    IF jsonb_array_length(c->'cancellations') > 0 THEN
        UPDATE operations o
        SET cancel_requested = true, updated_at = clock_timestamp()
        WHERE o.op_id = ANY (ARRAY(SELECT jsonb_array_elements_text(c->'cancellations'))::uuid[])
          AND o.room_id = v_room;
    END IF;

    IF jsonb_array_length(c->'ledger') > 0 THEN
        -- The Room's next rows: numbered after its last one (the primary key's last entry).
        INSERT INTO ledger_entries (room_id, seq, revision, entry)
        SELECT v_room,
               coalesce((SELECT max(l.seq) FROM ledger_entries l WHERE l.room_id = v_room), -1)
                   + e.ord,
               v_next, e.value
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
