-- Budget pools (issue 18, DESIGN.md B8): an owner- or campaign-wide limit that Rooms draw on.
-- A pool is its ledger (agentroom_domain::ledger::BudgetLedger: balances, open holds, the
-- overrun that stopped it) with a revision, and its log as rows that replay to it. The host's
-- administrator creates, raises and acknowledges a pool; a Room's commit that reserves,
-- charges or releases moves the pool it draws on in the same transaction, after the Room's
-- row (every writer takes the Room's row, then the pool's: no lock cycle).
CREATE TABLE budget_pools (
    pool_id    text   PRIMARY KEY
        CONSTRAINT budget_pools_id_format CHECK (pool_id ~ '^[a-z0-9_-]{1,64}$'),
    -- 1 when created, +1 per change.
    revision   bigint NOT NULL CONSTRAINT budget_pools_revision_positive CHECK (revision >= 1),
    ledger     jsonb  NOT NULL CONSTRAINT budget_pools_ledger_object CHECK (jsonb_typeof(ledger) = 'object'),
    -- How many log rows it has: the next row's seq is this + 1.
    entries    bigint NOT NULL CONSTRAINT budget_pools_entries_counted CHECK (entries >= 1),
    created_at_ms bigint NOT NULL
);

-- The pool's log (agentroom_domain::ledger::LedgerEntry), from its opening.
CREATE TABLE pool_ledger (
    pool_id text   NOT NULL REFERENCES budget_pools (pool_id),
    seq     bigint NOT NULL CONSTRAINT pool_ledger_seq_positive CHECK (seq >= 1),
    -- The Room whose commit appended it; NULL for the host's own entries.
    room_id text   NULL,
    entry   jsonb  NOT NULL,
    at_ms   bigint NOT NULL,
    PRIMARY KEY (pool_id, seq)
);
