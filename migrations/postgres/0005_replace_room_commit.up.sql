-- A commit in one statement (issue 4's bench goal). `RoomStore::commit` sends one prepared
-- statement of data-modifying CTEs (agentroom_store_postgres::sql::commit_room) instead of
-- calling the plpgsql function room_commit(jsonb), which planned and ran each of its
-- statements through SPI and parsed the whole commit as one jsonb. Every write of the
-- statement is conditioned on its compare-and-swap of the Room row, so a stale commit writes
-- nothing. A fenced receipt is refused by agentroom_refuse (SQLSTATE AR001), and an event
-- accepted twice by the unique index room_history_event_once (0003), either of which rolls
-- the whole statement back.
--
-- Each write also costs less, since the tables the commit writes carry only what a query or a
-- rule needs:
-- * operations keeps one index besides its primary key, over open operations only, which
--   the claim, the open listing and the listing by an open status read. A settled or resolved
--   row leaves it, so settling a call adds no index entry but the primary key's. Gone: the
--   unique index on seq (an identity column GENERATED ALWAYS is unique by itself, and
--   nothing looks a row up by seq; the same on outbox), operations_status over every row,
--   and operations_claimable, whose lease_expires_at made every heartbeat a non-HOT update.
-- * The foreign keys to rooms are dropped: each inserted row ran a trigger that looked the
--   Room up again (FOR KEY SHARE), while the only statements that insert those rows (the
--   commit and the creation) write them through the Room row they have just written and
--   locked, and nothing deletes a Room.
-- * The CHECK constraints of these tables are dropped: PostgreSQL reads and plans each one
--   again for every statement that writes the table. The values they bounded are computed by
--   the statements themselves (revisions, sequence numbers, sizes, lease generations, the
--   status literals in the store's SQL).
-- * A Room row counts its ledger rows (ledger_rows), so a commit numbers its rows from the
--   Room row it updates anyway instead of reading the last one back from the index.
-- * JSON columns the database never looks into are `json`: stored as written and still
--   checked to be JSON, where jsonb parses every document into its binary form on the way in
--   and prints it again on the way out.

DROP FUNCTION room_commit(jsonb);

-- Raises a refusal of the commit statement: SQLSTATE `code` with `message` and `detail`.
-- VOLATILE, so the planner never evaluates it ahead of the CASE that guards it.
CREATE FUNCTION agentroom_refuse(code text, message text, detail text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message, DETAIL = detail;
END;
$fn$;

ALTER TABLE rooms ADD COLUMN ledger_rows bigint NOT NULL DEFAULT 0;
UPDATE rooms r
SET ledger_rows = (SELECT coalesce(max(l.seq) + 1, 0) FROM ledger_entries l
                   WHERE l.room_id = r.room_id);
ALTER TABLE rooms ALTER COLUMN ledger_rows DROP DEFAULT;

DROP INDEX operations_claimable;
DROP INDEX operations_status;
ALTER TABLE operations DROP CONSTRAINT operations_seq_key;
ALTER TABLE outbox DROP CONSTRAINT outbox_seq_key;
-- Open operations by status, oldest first: claims (in_flight), the open listing and the
-- listing by an open status.
CREATE INDEX operations_open ON operations (status, seq)
    WHERE status NOT IN ('applied', 'resolved');

ALTER TABLE room_history DROP CONSTRAINT room_history_room_id_fkey;
ALTER TABLE room_snapshots DROP CONSTRAINT room_snapshots_room_id_fkey;
ALTER TABLE operations DROP CONSTRAINT operations_room_id_fkey;
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_room_id_fkey;
ALTER TABLE outbox DROP CONSTRAINT outbox_room_id_fkey;

ALTER TABLE rooms
    DROP CONSTRAINT rooms_revision_check,
    DROP CONSTRAINT rooms_check,
    DROP CONSTRAINT rooms_snapshot_bytes_check,
    DROP CONSTRAINT rooms_bytes_since_snapshot_check;
ALTER TABLE room_history
    DROP CONSTRAINT room_history_revision_check,
    DROP CONSTRAINT room_history_log_check;
ALTER TABLE room_snapshots DROP CONSTRAINT room_snapshots_state_check;
ALTER TABLE operations
    DROP CONSTRAINT operations_status_check,
    DROP CONSTRAINT operations_lease_generation_check,
    DROP CONSTRAINT operations_recovery_attempts_check;
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_seq_check;
ALTER TABLE outbox DROP CONSTRAINT outbox_attempts_check;

ALTER TABLE room_history
    ALTER COLUMN delta TYPE json USING delta::json,
    ALTER COLUMN log TYPE json USING log::json;
ALTER TABLE room_snapshots ALTER COLUMN state TYPE json USING state::json;
ALTER TABLE ledger_entries ALTER COLUMN entry TYPE json USING entry::json;
ALTER TABLE operations
    ALTER COLUMN request TYPE json USING request::json,
    ALTER COLUMN receipt TYPE json USING receipt::json,
    ALTER COLUMN resolution TYPE json USING resolution::json;
ALTER TABLE outbox ALTER COLUMN body TYPE json USING body::json;
ALTER TABLE room_events ALTER COLUMN body TYPE json USING body::json;
