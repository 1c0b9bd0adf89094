-- Budget pools (issue 18, DESIGN.md B8): an owner- or campaign-wide limit that Rooms draw on,
-- stored as its ledger (agentroom_domain::ledger::BudgetLedger) with a revision, and its log
-- as rows that replay to it. A Room's commit moves its pool in the same (single-writer)
-- transaction.
CREATE TABLE budget_pools (
    pool_id    TEXT    PRIMARY KEY NOT NULL CHECK (length(pool_id) BETWEEN 1 AND 64),
    revision   INTEGER NOT NULL CHECK (revision >= 1),
    ledger     TEXT    NOT NULL CHECK (json_valid(ledger)),
    entries    INTEGER NOT NULL CHECK (entries >= 1),
    created_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE pool_ledger (
    pool_id TEXT    NOT NULL REFERENCES budget_pools (pool_id),
    seq     INTEGER NOT NULL CHECK (seq >= 1),
    room_id TEXT    NULL,
    entry   TEXT    NOT NULL CHECK (json_valid(entry)),
    at_ms   INTEGER NOT NULL,
    PRIMARY KEY (pool_id, seq)
) STRICT;
