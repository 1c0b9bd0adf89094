-- Reverts 0005: the JSON columns are jsonb again, the CHECK constraints, foreign keys and
-- operations' indexes are back, Rooms no longer count their ledger rows, and a commit is one
-- call of room_commit(jsonb), restated as 0003 left it.

ALTER TABLE room_events ALTER COLUMN body TYPE jsonb USING body::jsonb;
ALTER TABLE outbox ALTER COLUMN body TYPE jsonb USING body::jsonb;
ALTER TABLE operations
    ALTER COLUMN request TYPE jsonb USING request::jsonb,
    ALTER COLUMN receipt TYPE jsonb USING receipt::jsonb,
    ALTER COLUMN resolution TYPE jsonb USING resolution::jsonb;
ALTER TABLE ledger_entries ALTER COLUMN entry TYPE jsonb USING entry::jsonb;
ALTER TABLE room_snapshots ALTER COLUMN state TYPE jsonb USING state::jsonb;
ALTER TABLE room_history
    ALTER COLUMN delta TYPE jsonb USING delta::jsonb,
    ALTER COLUMN log TYPE jsonb USING log::jsonb;

ALTER TABLE outbox ADD CONSTRAINT outbox_attempts_check CHECK (attempts >= 0);
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_seq_check CHECK (seq >= 0);
ALTER TABLE operations
    ADD CONSTRAINT operations_status_check CHECK (status IN
        ('in_flight', 'receipted', 'applied', 'uncertain', 'dead_letter', 'resolved')),
    ADD CONSTRAINT operations_lease_generation_check CHECK (lease_generation >= 0),
    ADD CONSTRAINT operations_recovery_attempts_check CHECK (recovery_attempts >= 0);
ALTER TABLE room_snapshots
    ADD CONSTRAINT room_snapshots_state_check CHECK (jsonb_typeof(state) = 'object');
ALTER TABLE room_history
    ADD CONSTRAINT room_history_revision_check CHECK (revision >= 1),
    ADD CONSTRAINT room_history_log_check CHECK (jsonb_typeof(log) = 'array');
ALTER TABLE rooms
    ADD CONSTRAINT rooms_revision_check CHECK (revision >= 1),
    ADD CONSTRAINT rooms_check CHECK (snapshot_revision BETWEEN 1 AND revision),
    ADD CONSTRAINT rooms_snapshot_bytes_check CHECK (snapshot_bytes >= 0),
    ADD CONSTRAINT rooms_bytes_since_snapshot_check CHECK (bytes_since_snapshot >= 0);

ALTER TABLE outbox ADD CONSTRAINT outbox_room_id_fkey
    FOREIGN KEY (room_id) REFERENCES rooms (room_id);
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_room_id_fkey
    FOREIGN KEY (room_id) REFERENCES rooms (room_id);
ALTER TABLE operations ADD CONSTRAINT operations_room_id_fkey
    FOREIGN KEY (room_id) REFERENCES rooms (room_id);
ALTER TABLE room_snapshots ADD CONSTRAINT room_snapshots_room_id_fkey
    FOREIGN KEY (room_id) REFERENCES rooms (room_id);
ALTER TABLE room_history ADD CONSTRAINT room_history_room_id_fkey
    FOREIGN KEY (room_id) REFERENCES rooms (room_id);

DROP INDEX operations_open;
ALTER TABLE outbox ADD CONSTRAINT outbox_seq_key UNIQUE (seq);
ALTER TABLE operations ADD CONSTRAINT operations_seq_key UNIQUE (seq);
CREATE INDEX operations_claimable ON operations (lease_expires_at NULLS FIRST, seq)
    WHERE status = 'in_flight';
CREATE INDEX operations_status ON operations (status, seq);

DROP FUNCTION agentroom_refuse(text, text, text);
ALTER TABLE rooms DROP COLUMN ledger_rows;

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
