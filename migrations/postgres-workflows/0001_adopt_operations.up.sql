-- The workflow store's own ledger (issue 19): its table, `operations` (one row per provider
-- call, with its lease, generation and receipt; B1), is recorded here, in
-- _agentroom_workflow_migrations, apart from the planner's state in _sqlx_migrations. A
-- consumer of the workflow store keeps its calls while the planner's state is reverted
-- (`agentroom migrate down` keeps this table), and the planner's migrations never change it.
--
-- A database migrated before the split already has the table, made by the planner's 0002 and
-- reshaped by its 0005: this migration adopts it as it is. On a database without it, it makes
-- the same table: the shape 0005 left, with no foreign key to rooms (0005 dropped it), so the
-- workflow store stands alone. `agentroom migrate up` applies the planner's ledger first, so
-- on a fresh database the planner's 0002 makes the table and this migration adopts it.

CREATE TABLE IF NOT EXISTS operations (
    op_id              uuid        PRIMARY KEY,
    -- Creation order, for "oldest first".
    seq                bigint      GENERATED ALWAYS AS IDENTITY,
    room_id            text        NOT NULL,
    request            json        NOT NULL,
    -- in_flight, receipted, applied, uncertain, dead_letter or resolved.
    status             text        NOT NULL,
    -- 0 before any lease; +1 per lease taken. Every write of a running call is fenced on it.
    lease_generation   bigint      NOT NULL,
    lease_owner        text        NULL,
    -- By the database clock (D3); NULL when no lease was ever taken.
    lease_expires_at   timestamptz NULL,
    cancel_requested   boolean     NOT NULL DEFAULT false,
    receipt            json        NULL,
    recovery_attempts  integer     NOT NULL DEFAULT 0,
    dead_letter_reason text        NULL,
    resolution         json        NULL,
    created_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at         timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Open operations by status, oldest first: claims (in_flight), the open listing and the
-- listing by an open status.
CREATE INDEX IF NOT EXISTS operations_open ON operations (status, seq)
    WHERE status NOT IN ('applied', 'resolved');
