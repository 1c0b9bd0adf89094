//! Every SQL statement the stores run, as constants: one place to read the queries, and the
//! exact text the query-plan test EXPLAINs. Each runs as a prepared statement (sqlx caches it
//! per connection); each write is one statement, so one round trip, except a planning
//! dependency update, which locks its plan first. A Room commit is one statement of
//! data-modifying CTEs, [`commit_room`], whose text depends only on which parts the commit
//! writes.
//!
//! Room scoping: every planning and Room statement names the Room, so a plan of another Room
//! is no plan. Workflow and outbox statements address rows by their global ids (operation
//! and notification ids are UUIDs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Creates a plan. `$1` plan_id, `$2` room, `$3` name, `$4` description, `$5` columns
/// (JSON text), `$6` created_ms. Returns the new `plan_key`.
pub const INSERT_PLAN: &str = "\
INSERT INTO planning_plans (plan_id, room_id, name, description, columns, created_ms) \
VALUES ($1, $2, $3, $4, $5::jsonb, $6) \
RETURNING plan_key";

/// The Room's plans in creation order. `$1` room.
pub const SELECT_PLANS: &str = "\
SELECT plan_key, plan_id, name, description, columns::text, objective_id::text, created_ms \
FROM planning_plans \
WHERE room_id = $1 \
ORDER BY plan_key";

/// One plan of the Room. `$1` room, `$2` plan_id.
pub const SELECT_PLAN: &str = "\
SELECT plan_key, plan_id, name, description, columns::text, objective_id::text, created_ms \
FROM planning_plans \
WHERE room_id = $1 AND plan_id = $2";

/// Adds a task without dependencies, if the plan is the Room's. `$1` plan_key, `$2` room,
/// `$3` task_id, `$4` title, `$5` column_ix, `$6` description, `$7` assignee, `$8` metadata
/// (JSON text), `$9` created_ms. One row affected, or none when the plan is not the Room's.
pub const INSERT_TASK: &str = "\
INSERT INTO planning_tasks \
    (plan_key, task_id, title, column_ix, description, assignee, deps, metadata, created_ms, \
     updated_ms) \
SELECT plan_key, $3, $4, $5, $6, $7, '{}'::text[], $8::jsonb, $9, $9 \
FROM planning_plans \
WHERE plan_key = $1 AND room_id = $2";

/// Adds a task with dependencies in one statement: the plan must be the Room's and every
/// dependency a task of that plan, read in the snapshot that inserts. Parameters as
/// [`INSERT_TASK`], plus `$10` deps. Returns one row: whether the plan was found, which of
/// the dependencies are tasks of the plan, and whether the task was inserted.
pub const INSERT_TASK_WITH_DEPS: &str = "\
WITH plan AS ( \
    SELECT plan_key FROM planning_plans WHERE plan_key = $1 AND room_id = $2 \
), known AS ( \
    SELECT coalesce(array_agg(t.task_id), '{}'::text[]) AS ids \
    FROM planning_tasks t \
    WHERE t.plan_key = $1 AND t.task_id = ANY($10::text[]) \
), inserted AS ( \
    INSERT INTO planning_tasks \
        (plan_key, task_id, title, column_ix, description, assignee, deps, metadata, \
         created_ms, updated_ms) \
    SELECT plan.plan_key, $3, $4, $5, $6, $7, $10::text[], $8::jsonb, $9, $9 \
    FROM plan, known \
    WHERE $10::text[] <@ known.ids \
    RETURNING 1 \
) \
SELECT EXISTS (SELECT 1 FROM plan), known.ids, EXISTS (SELECT 1 FROM inserted) \
FROM known";

/// Changes a task's column and/or assignee (no dependency change, so no plan lock: the
/// dependency graph is untouched). `$1` plan_key, `$2` room, `$3` task_id, `$4` column_ix or
/// NULL, `$5` assignee or NULL, `$6` updated_ms. One row affected, or none when the task is
/// not in that plan of the Room.
pub const UPDATE_TASK_FIELDS: &str = "\
UPDATE planning_tasks AS t \
SET column_ix = coalesce($4::integer, t.column_ix), \
    assignee = coalesce($5::text, t.assignee), \
    updated_ms = $6 \
FROM planning_plans AS p \
WHERE t.task_id = $3 AND t.plan_key = $1 AND p.plan_key = $1 AND p.room_id = $2";

/// Serializes dependency updates per plan: locks the plan row (`FOR NO KEY UPDATE`, which
/// does not block task inserts, whose foreign key takes only `FOR KEY SHARE`) and says
/// whether the task is in it. `$1` plan_key, `$2` room, `$3` task_id. No row when the plan is
/// not the Room's.
pub const LOCK_PLAN_FOR_DEPS: &str = "\
SELECT EXISTS (SELECT 1 FROM planning_tasks t WHERE t.task_id = $3 AND t.plan_key = $1) \
FROM planning_plans \
WHERE plan_key = $1 AND room_id = $2 \
FOR NO KEY UPDATE";

/// The part of a plan's dependency graph that the cycle check walks: the new dependencies
/// that are tasks of the plan, and every task reachable from them (not expanding the task
/// being changed, where a walk that reaches it has found a cycle). `$1` plan_key, `$2` the
/// new deps, `$3` the task being changed. Rows `(task_id, deps)`.
pub const SELECT_REACHABLE_DEPS: &str = "\
WITH RECURSIVE reach (task_id, deps) AS ( \
    SELECT t.task_id, t.deps \
    FROM planning_tasks t \
    WHERE t.plan_key = $1 AND t.task_id = ANY($2::text[]) \
  UNION \
    SELECT t.task_id, t.deps \
    FROM reach r \
    CROSS JOIN LATERAL unnest(r.deps) AS d (id) \
    JOIN planning_tasks t ON t.task_id = d.id \
    WHERE r.task_id <> $3 AND t.plan_key = $1 \
) \
SELECT task_id, deps FROM reach";

/// Writes a task's new dependencies (and column and/or assignee, if given) under the plan
/// lock. `$1` plan_key, `$2` task_id, `$3` deps, `$4` column_ix or NULL, `$5` assignee or
/// NULL, `$6` updated_ms.
pub const UPDATE_TASK_WITH_DEPS: &str = "\
UPDATE planning_tasks \
SET deps = $3::text[], \
    column_ix = coalesce($4::integer, column_ix), \
    assignee = coalesce($5::text, assignee), \
    updated_ms = $6 \
WHERE task_id = $2 AND plan_key = $1";

/// A board (or task/list by plan): the plan's tasks in creation order, if the plan is the
/// Room's. `$1` plan_key, `$2` room. Reads only that plan's index entries
/// (`planning_tasks_board`, index-only).
pub const SELECT_BOARD_TASKS: &str = "\
SELECT t.task_id, t.title, t.column_ix, t.assignee \
FROM planning_tasks t \
WHERE t.plan_key = $1 \
  AND EXISTS (SELECT 1 FROM planning_plans p WHERE p.plan_key = $1 AND p.room_id = $2) \
ORDER BY t.task_key";

/// task/list by plan and status: the plan's tasks of one column in creation order, if the
/// plan is the Room's. `$1` plan_key, `$2` room, `$3` column_ix. Reads only that plan's
/// entries of that column (`planning_tasks_column`, index-only).
pub const SELECT_COLUMN_TASKS: &str = "\
SELECT t.task_id, t.title, t.column_ix, t.assignee \
FROM planning_tasks t \
WHERE t.plan_key = $1 AND t.column_ix = $3 \
  AND EXISTS (SELECT 1 FROM planning_plans p WHERE p.plan_key = $1 AND p.room_id = $2) \
ORDER BY t.task_key";

/// Everything stored about one task of a plan of the Room. `$1` plan_key, `$2` room, `$3`
/// task_id.
pub const SELECT_TASK_DETAIL: &str = "\
SELECT t.task_id, t.title, t.column_ix, t.assignee, t.description, t.deps, t.metadata::text \
FROM planning_tasks t \
JOIN planning_plans p ON p.plan_key = t.plan_key \
WHERE t.task_id = $3 AND t.plan_key = $1 AND p.room_id = $2";

/// Whether the migration table exists (in the connection's `search_path`).
pub const MIGRATION_TABLE_EXISTS: &str = "SELECT to_regclass('_sqlx_migrations') IS NOT NULL";

/// The migrations recorded as applied (or failed), in version order.
pub const SELECT_APPLIED_MIGRATIONS: &str = "\
SELECT version, description, success, checksum \
FROM _sqlx_migrations \
ORDER BY version";

/// Whether the workflow store's migration ledger exists (in the search path).
pub const WORKFLOW_MIGRATION_TABLE_EXISTS: &str =
    "SELECT to_regclass('_agentroom_workflow_migrations') IS NOT NULL";

/// The workflow store's migrations recorded as applied (or failed), in version order.
pub const SELECT_APPLIED_WORKFLOW_MIGRATIONS: &str = "\
SELECT version, description, success, checksum \
FROM _agentroom_workflow_migrations \
ORDER BY version";

/// Whether the workflow store's table is there (in the search path).
pub const OPERATIONS_EXISTS: &str = "SELECT to_regclass('operations') IS NOT NULL";

/// Moves the workflow store's table, with its indexes, constraints and identity sequence, out
/// of the way of the planner's migrations (inside their transaction, under the migration lock).
pub const MOVE_OPERATIONS_ASIDE: &str = "\
CREATE SCHEMA _agentroom_workflows_aside; \
ALTER TABLE operations SET SCHEMA _agentroom_workflows_aside";

/// Drops the table the planner's migrations left under the name `operations`, if any, and
/// moves the workflow store's back into the schema the search path writes to.
pub const BRING_OPERATIONS_BACK: &str = "\
DROP TABLE IF EXISTS operations; \
DO $$ BEGIN \
    EXECUTE format('ALTER TABLE _agentroom_workflows_aside.operations SET SCHEMA %I', \
                   current_schema()); \
END $$; \
DROP SCHEMA _agentroom_workflows_aside";

// --- Rooms (migrations 0002, 0003, 0005) -----------------------------------------------------------------

/// Creates a Room at revision 1 in one statement: the room row (counting its ledger rows),
/// history row 1 (a delta that replaces the empty document with the state), snapshot 1 and
/// the opening ledger rows. `$1`
/// room, `$2` state (JSON text), `$3` the state's size in bytes, `$4` at_ms, `$5` ledger
/// entries (JSON array text). Returns 1 when created, 0 when the Room exists.
pub const CREATE_ROOM: &str = "\
WITH room AS ( \
    INSERT INTO rooms (room_id, revision, snapshot_revision, snapshot_bytes, \
                       bytes_since_snapshot, ledger_rows) \
    VALUES ($1, 1, 1, $3, 0, json_array_length($5::json)) \
    ON CONFLICT (room_id) DO NOTHING \
    RETURNING room_id \
), history AS ( \
    INSERT INTO room_history (room_id, revision, input, event_id, delta, log, at_ms) \
    SELECT room_id, 1, 'create', NULL, \
           json_build_object('op', 'replace', 'value', $2::json), '[]'::json, $4 \
    FROM room \
), snapshot AS ( \
    INSERT INTO room_snapshots (room_id, revision, state) \
    SELECT room_id, 1, $2::json FROM room \
), ledger AS ( \
    INSERT INTO ledger_entries (room_id, seq, revision, entry) \
    SELECT room.room_id, e.ord - 1, 1, e.value \
    FROM room, json_array_elements($5::json) WITH ORDINALITY AS e(value, ord) \
) \
SELECT count(*) FROM room";

/// A Room's current revision, its latest snapshot and the deltas after it, read in one
/// snapshot of the database. `$1` room.
pub const LOAD_ROOM: &str = "\
SELECT r.revision, s.revision, s.state::text, r.snapshot_bytes, r.bytes_since_snapshot, \
       ARRAY(SELECT h.delta::text FROM room_history h \
             WHERE h.room_id = r.room_id AND h.revision > s.revision \
             ORDER BY h.revision) \
FROM rooms r \
JOIN room_snapshots s ON s.room_id = r.room_id AND s.revision = r.snapshot_revision \
WHERE r.room_id = $1";

/// A Room's current revision and the deltas after revision `$2`, when it is at most `$3`
/// revisions ahead (NULL deltas otherwise). `$1` room.
pub const LOAD_ROOM_SINCE: &str = "\
SELECT r.revision, r.snapshot_bytes, r.bytes_since_snapshot, \
       CASE WHEN r.revision >= $2 AND r.revision - $2 <= $3 THEN \
           ARRAY(SELECT h.delta::text FROM room_history h \
                 WHERE h.room_id = r.room_id AND h.revision > $2 \
                 ORDER BY h.revision) \
       END \
FROM rooms r \
WHERE r.room_id = $1";

/// The nearest snapshot at or before a revision and the deltas up to it. `$1` room, `$2`
/// revision.
pub const ROOM_STATE_AT: &str = "\
SELECT s.revision, s.state::text, \
       ARRAY(SELECT h.delta::text FROM room_history h \
             WHERE h.room_id = s.room_id AND h.revision > s.revision AND h.revision <= $2 \
             ORDER BY h.revision) \
FROM room_snapshots s \
WHERE s.room_id = $1 AND s.revision <= $2 \
ORDER BY s.revision DESC \
LIMIT 1";

/// Which parts a commit statement ([`commit_room`]) has besides the compare-and-swap of the
/// Room row and the history row: each is there only when the commit writes it, since even an
/// empty part costs its plan's setup on every execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CommitParts {
    /// A new snapshot (`$9`, `$10`).
    pub snapshot: bool,
    /// New operations (`$11`..`$15`).
    operations: bool,
    /// Exactly one new operation (a durable call's transaction 1): read from the arrays'
    /// first elements instead of unnesting them, which spares the plan a function scan and
    /// a nested loop.
    single_operation: bool,
    /// How many operations the commit touches (receipts, applied, cancelled: `$16`..`$20`),
    /// as slots: the count rounded up to a power of two, so that few texts serve every count.
    touched_slots: usize,
    /// Ledger entries (`$21`).
    ledger: bool,
    /// Exactly one ledger entry (a reservation): read from the array's first element.
    single_entry: bool,
    /// Notifications (`$22`, `$23`).
    pub notifications: bool,
    /// Closed objectives' records (`$25`..`$28`, migration 0009).
    pub records: bool,
    /// Content the input carries (`$29`..`$31`, migration 0007).
    pub contents: bool,
    /// The accepted event, persisted by this commit (`$6`, `$32`..`$34`; issue 21).
    pub event: bool,
}

impl CommitParts {
    /// Sets how many operations the commit creates.
    pub fn creating(self, operations: usize) -> Self {
        Self {
            operations: operations > 0,
            single_operation: operations == 1,
            ..self
        }
    }

    /// Sets how many ledger entries the commit appends.
    pub fn appending(self, entries: usize) -> Self {
        Self {
            ledger: entries > 0,
            single_entry: entries == 1,
            ..self
        }
    }

    /// Sets how many operations the commit touches.
    pub fn touching(self, operations: usize) -> Self {
        Self {
            touched_slots: match operations {
                0 => 0,
                n => n.next_power_of_two(),
            },
            ..self
        }
    }
}

/// The commit statement with `parts`: one commit, all or nothing, in one statement of
/// data-modifying CTEs (migration 0005). Its text depends only on `parts`; it is assembled
/// from the constant pieces below once per combination and kept, and no value is ever
/// written into it.
///
/// The compare-and-swap of the Room row comes first and every write is conditioned on it, so
/// a stale commit writes nothing and returns no row (the caller then reads the Room's
/// revision: [`ROOM_REVISION`]). All parts read the snapshot taken when the statement
/// started, which holds every earlier commit of the Room whenever the compare-and-swap
/// matches: each commit moves the Room row, and the update waits for a concurrent one and
/// then rechecks the revision on the newest row.
///
/// Parameters, always all bound: `$1` room, `$2` expected revision, `$3` delta (JSON text),
/// `$4` its size in bytes, `$5` input kind, `$6` accepted event id or NULL, `$7` log (JSON
/// text), `$8` at_ms, `$9` a new snapshot (JSON text) or NULL, `$10` its size or NULL; new
/// operations `$11` ids, `$12` requests (JSON texts), `$13` lease owners (NULL: no lease),
/// `$14` lease milliseconds, `$15` whether the commit also cancels them; the operations the
/// commit touches, receipts first in commit order, `$16` ids, `$17` receipt generations and
/// `$18` receipts (JSON texts; NULL without a receipt), `$19` applied, `$20` cancelled (a
/// slot past the last operation is NULL and matches nothing); `$21` ledger entries (JSON
/// texts); notifications `$22` ids, `$23` bodies (JSON texts); `$24` the operator input id
/// it decided or NULL (migration 0006); closed objectives' records `$25`..`$28` (migration
/// 0009, [`COMMIT_ROOM_RECORDS`]); content `$29`..`$31` ([`COMMIT_ROOM_CONTENTS`]); the
/// accepted event's author, kind and body `$32`..`$34` when the commit persists it
/// ([`COMMIT_ROOM_EVENT`]).
///
/// Plans: PostgreSQL keeps a prepared statement's generic plan, built once, when it is
/// estimated no dearer than the plans for the first five executions' values plus a planning
/// charge that grows with the relations the statement names; this one's are alike, since no
/// cost depends much on how long the arrays are (a plan for the values drops an empty slot,
/// one key lookup, while each slot names two relations more). So each touched operation is
/// its own update by primary key: an update joined to the arrays is planned as a hash join
/// over the whole table while the table is small (a fresh database), and the kept plan goes
/// on scanning it as it grows.
///
/// Returns, when the compare-and-swap matched, one row: the new revision, the delta bytes
/// since the snapshot and the snapshot's size (and NULL). Refusals are errors that roll
/// everything back: a receipt not written because it is fenced (not in flight at that
/// generation in this Room, or receipted already), SQLSTATE [`FENCED_SQLSTATE`] with the
/// operations whose receipts were written as DETAIL; an event the Room accepted before, a
/// unique violation of [`EVENT_ONCE_INDEX`] (T1; the history row is written before the
/// receipts are checked, so it is reported first); an operator input the Room decided before,
/// a unique violation of [`INPUT_ONCE_INDEX`] (the same history row).
pub fn commit_room(parts: CommitParts) -> Arc<str> {
    static STATEMENTS: OnceLock<Mutex<HashMap<CommitParts, Arc<str>>>> = OnceLock::new();
    let mut statements = STATEMENTS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    // A text per combination, kept for the life of the process (a few dozen at most).
    Arc::clone(
        statements
            .entry(parts)
            .or_insert_with(|| assemble_commit_room(parts).into()),
    )
}

fn assemble_commit_room(parts: CommitParts) -> String {
    let mut text = String::from(COMMIT_ROOM_CAS);
    if parts.snapshot {
        text.push_str(COMMIT_ROOM_SNAPSHOT);
    }
    if parts.operations && parts.single_operation {
        text.push_str(COMMIT_ROOM_OPERATION);
    } else if parts.operations {
        text.push_str(COMMIT_ROOM_OPERATIONS);
    }
    for slot in 1..=parts.touched_slots {
        text.push_str(&COMMIT_ROOM_TOUCHED.replace("{i}", &slot.to_string()));
    }
    if parts.ledger && parts.single_entry {
        text.push_str(COMMIT_ROOM_ENTRY);
    } else if parts.ledger {
        text.push_str(COMMIT_ROOM_LEDGER);
    }
    if parts.notifications {
        text.push_str(COMMIT_ROOM_NOTIFICATIONS);
    }
    if parts.records {
        text.push_str(COMMIT_ROOM_RECORDS);
    }
    if parts.contents {
        text.push_str(COMMIT_ROOM_CONTENTS);
    }
    if parts.event {
        text.push_str(COMMIT_ROOM_EVENT);
    }
    if parts.touched_slots == 0 {
        text.push_str(COMMIT_ROOM_RESULT);
    } else {
        let written = (1..=parts.touched_slots)
            .map(|slot| format!("SELECT op_id FROM touched{slot} WHERE receipted"))
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        text.push_str(&COMMIT_ROOM_RESULT_CHECKED.replace("{written}", &written));
    }
    text
}

/// The compare-and-swap and the history row, which every commit writes.
const COMMIT_ROOM_CAS: &str = "\
WITH cas AS ( \
    UPDATE rooms r \
    SET revision = r.revision + 1, \
        snapshot_revision = CASE WHEN $9::text IS NULL THEN r.snapshot_revision \
                                 ELSE r.revision + 1 END, \
        snapshot_bytes = coalesce($10::bigint, r.snapshot_bytes), \
        bytes_since_snapshot = CASE WHEN $9::text IS NULL \
                                    THEN r.bytes_since_snapshot + $4::bigint ELSE 0 END, \
        ledger_rows = r.ledger_rows + cardinality($21), \
        updated_at = clock_timestamp() \
    WHERE r.room_id = $1 AND r.revision = $2 \
    RETURNING r.revision, r.bytes_since_snapshot, r.snapshot_bytes, r.ledger_rows \
), history AS ( \
    INSERT INTO room_history (room_id, revision, input, event_id, delta, log, at_ms, \
                              input_id) \
    SELECT $1, cas.revision, $5, $6::uuid, $3::json, $7::json, $8, $24::uuid FROM cas \
    RETURNING revision \
)";

const COMMIT_ROOM_SNAPSHOT: &str = ", \
snapshot AS ( \
    INSERT INTO room_snapshots (room_id, revision, state) \
    SELECT $1, cas.revision, $9::json FROM cas \
)";

/// New operations with the committer's lease (B1), idempotent on their ids.
const COMMIT_ROOM_OPERATIONS: &str = ", \
created AS ( \
    INSERT INTO operations (op_id, room_id, request, status, lease_generation, lease_owner, \
                            lease_expires_at, cancel_requested) \
    SELECT n.op, $1, n.request, 'in_flight', CASE WHEN n.owner IS NULL THEN 0 ELSE 1 END, \
           n.owner, \
           CASE WHEN n.owner IS NOT NULL \
                THEN clock_timestamp() + n.ms * interval '1 millisecond' END, \
           n.cancel \
    FROM cas, unnest($11::uuid[], $12::json[], $13::text[], $14::bigint[], \
                     $15::boolean[]) AS n (op, request, owner, ms, cancel) \
    ON CONFLICT (op_id) DO NOTHING \
)";

/// One new operation, as [`COMMIT_ROOM_OPERATIONS`] writes it, from the arrays' first
/// elements.
const COMMIT_ROOM_OPERATION: &str = ", \
created AS ( \
    INSERT INTO operations (op_id, room_id, request, status, lease_generation, lease_owner, \
                            lease_expires_at, cancel_requested) \
    SELECT ($11::text[])[1]::uuid, $1, ($12::text[])[1]::json, 'in_flight', \
           CASE WHEN ($13::text[])[1] IS NULL THEN 0 ELSE 1 END, ($13::text[])[1], \
           CASE WHEN ($13::text[])[1] IS NOT NULL \
                THEN clock_timestamp() + ($14::bigint[])[1] * interval '1 millisecond' END, \
           ($15::boolean[])[1] \
    FROM cas \
    ON CONFLICT (op_id) DO NOTHING \
)";

/// Touched operation `{i}`: its receipt, fenced on the lease generation and written once,
/// straight to `applied` when the same decision applies it (one row version); applied;
/// cancelled. An operation of another Room is not touched.
const COMMIT_ROOM_TOUCHED: &str = ", \
touched{i} AS ( \
    UPDATE operations o \
    SET receipt = CASE WHEN $17[{i}] IS NULL THEN o.receipt ELSE $18[{i}]::json END, \
        status = CASE WHEN $19[{i}] THEN 'applied' \
                      WHEN $17[{i}] IS NOT NULL THEN 'receipted' ELSE o.status END, \
        cancel_requested = o.cancel_requested OR $20[{i}], \
        updated_at = clock_timestamp() \
    FROM cas \
    WHERE o.op_id = $16[{i}]::uuid AND o.room_id = $1 \
      AND ($17[{i}] IS NULL \
           OR (o.lease_generation = $17[{i}] AND o.status = 'in_flight' \
               AND o.receipt IS NULL)) \
      AND ($17[{i}] IS NOT NULL OR $20[{i}] OR o.status <> 'applied') \
    RETURNING o.op_id, $17[{i}] IS NOT NULL AS receipted \
)";

/// The Room's next ledger rows, numbered after its last one: the compare-and-swap counted
/// them onto the Room's rows.
const COMMIT_ROOM_LEDGER: &str = ", \
ledger AS ( \
    INSERT INTO ledger_entries (room_id, seq, revision, entry) \
    SELECT $1, cas.ledger_rows - cardinality($21) + e.ord - 1, cas.revision, e.entry \
    FROM cas, unnest($21::json[]) WITH ORDINALITY AS e (entry, ord) \
)";

/// One ledger row, as [`COMMIT_ROOM_LEDGER`] writes it, from the array's first element.
const COMMIT_ROOM_ENTRY: &str = ", \
ledger AS ( \
    INSERT INTO ledger_entries (room_id, seq, revision, entry) \
    SELECT $1, cas.ledger_rows - 1, cas.revision, ($21::text[])[1]::json \
    FROM cas \
)";

/// Outbox rows (T5), idempotent on their ids.
const COMMIT_ROOM_NOTIFICATIONS: &str = ", \
notified AS ( \
    INSERT INTO outbox (notification_id, room_id, revision, body) \
    SELECT n.id, $1, cas.revision, n.body \
    FROM cas, unnest($22::uuid[], $23::json[]) AS n (id, body) \
    ON CONFLICT (notification_id) DO NOTHING \
)";

/// Closed objectives' records (issue 21, migration 0009), after the Room's last one, and
/// the keys they are found by. `$25` objective ids, `$26` records (JSON texts), `$27` key
/// texts and `$28` the objective id of each key. The records' insert is a CTE the keys' insert
/// reads, so a record is written before its keys are checked against it.
const COMMIT_ROOM_RECORDS: &str = ", \
kept AS ( \
    INSERT INTO objective_records (room_id, objective_id, seq, revision, record) \
    SELECT $1, r.id, \
           (SELECT coalesce(max(o.seq), 0) FROM objective_records o WHERE o.room_id = $1) \
               + r.ord, \
           cas.revision, r.record \
    FROM cas, unnest($25::text[], $26::jsonb[]) WITH ORDINALITY AS r (id, record, ord) \
    RETURNING objective_id \
), kept_keys AS ( \
    INSERT INTO objective_record_keys (room_id, key, objective_id) \
    SELECT $1, k.key, k.id \
    FROM unnest($27::text[], $28::text[]) AS k (key, id) \
    WHERE k.id IN (SELECT objective_id FROM kept) \
)";

/// Content the decision's input carries, kept once per Room and address (migration 0007):
/// `$29` digests, `$30` media types, `$31` bytes; created at `$8`.
const COMMIT_ROOM_CONTENTS: &str = ", \
contents AS ( \
    INSERT INTO room_contents (room_id, digest, media_type, bytes, size, created_at_ms) \
    SELECT $1, c.digest, c.media_type, c.bytes, octet_length(c.bytes), $8 \
    FROM cas, unnest($29::text[], $30::text[], $31::bytea[]) AS c (digest, media_type, bytes) \
    ON CONFLICT (room_id, digest) DO NOTHING \
)";

/// The event the commit accepts, persisted with it (issue 21: an owner message persisted by
/// the process that decides it): `$6` its id, `$32` author, `$33` kind, `$34` body (JSON
/// text), at `$8`. An id stored already is a unique violation of [`EVENTS_PRIMARY_KEY`]
/// that rolls everything back (the caller persists it the checked way). Migration 0011's
/// trigger does not notify for it: the same statement's history row accepts it.
const COMMIT_ROOM_EVENT: &str = ", \
persisted AS ( \
    INSERT INTO room_events (event_id, room_id, author, kind, body, at_ms) \
    SELECT $6::uuid, $1, $32, $33, $34::jsonb, $8 FROM cas \
)";

/// The result of a commit that writes no receipt. Scanning `history` writes the history row
/// (and checks T1) before the row is returned.
const COMMIT_ROOM_RESULT: &str = " \
SELECT c.revision, c.bytes_since_snapshot, c.snapshot_bytes, NULL::bigint \
FROM cas c, history h";

/// The result of a commit that touches operations: refused, after the history row, when
/// fewer receipts were written than it carries. `{written}` lists the receipted touches.
const COMMIT_ROOM_RESULT_CHECKED: &str = " \
SELECT c.revision, c.bytes_since_snapshot, c.snapshot_bytes, \
       (SELECT CASE WHEN count(*) < cardinality(array_remove($17, NULL)) \
                    THEN agentroom_refuse('AR001', 'a receipt of the commit is fenced', \
                                          coalesce(array_agg(w.op_id)::text, '{}')) \
               END \
        FROM ({written}) AS w (op_id)) \
FROM cas c, history h";

/// The revision of a Room now, after a commit's compare-and-swap did not match (no row: no
/// such Room). `$1` room.
pub const ROOM_REVISION: &str = "SELECT revision FROM rooms WHERE room_id = $1";

/// The SQLSTATE [`commit_room`] raises when a receipt is fenced; its DETAIL lists the
/// operations whose receipts were written, as a PostgreSQL array (`{<op>,<op>}`). The whole
/// commit is rolled back.
pub const FENCED_SQLSTATE: &str = "AR001";

/// The unique index that lets a Room accept an event once (T1): a commit accepting it again
/// fails with a unique violation on it, and the whole commit is rolled back.
pub const EVENT_ONCE_INDEX: &str = "room_history_event_once";

/// The SQLSTATE of a unique violation.
pub const UNIQUE_VIOLATION_SQLSTATE: &str = "23505";

/// A Room's ledger rows in order. `$1` room.
pub const SELECT_LEDGER: &str = "\
SELECT entry::text FROM ledger_entries WHERE room_id = $1 ORDER BY seq";

/// Persists an event unless its id exists. `$1` event id, `$2` room, `$3` author, `$4` kind,
/// `$5` body (JSON text), `$6` at_ms. Returns whether it was inserted.
pub const INSERT_EVENT: &str = "\
WITH inserted AS ( \
    INSERT INTO room_events (event_id, room_id, author, kind, body, at_ms) \
    VALUES ($1::uuid, $2, $3, $4, $5::json, $6) \
    ON CONFLICT (event_id) DO NOTHING \
    RETURNING 1 \
) \
SELECT EXISTS (SELECT 1 FROM inserted)";

/// A persisted event by id, whatever its Room. `$1` event id.
pub const SELECT_EVENT: &str = "\
SELECT room_id, author, body::text FROM room_events WHERE event_id = $1::uuid";

/// A Room's persisted events whose acceptance no history row records, oldest first (T1).
/// `$1` room, `$2` limit.
pub const SELECT_UNACCEPTED_EVENTS: &str = "\
SELECT e.event_id::text, e.author, e.body::text FROM room_events e \
WHERE e.room_id = $1 AND NOT EXISTS ( \
    SELECT 1 FROM room_history h WHERE h.room_id = e.room_id AND h.event_id = e.event_id) \
ORDER BY e.at_ms, e.event_id LIMIT $2";

// --- Operations -----------------------------------------------------------------------------

/// The columns an operation record is read from (the table aliased `o`), in `OperationRecord`
/// order; the lease has expired when there is none or its time has passed by the database
/// clock.
macro_rules! operation_columns {
    () => {
        "o.op_id::text, o.room_id, o.request::text, o.status, o.lease_generation, \
         o.lease_owner, \
         (o.lease_expires_at IS NULL OR o.lease_expires_at <= clock_timestamp()), \
         o.cancel_requested, o.receipt::text, o.recovery_attempts, o.dead_letter_reason, \
         o.resolution::text"
    };
}

/// Claims up to `$1` in-flight operations whose lease has expired or never existed, oldest
/// first, skipping rows another claimer holds: bumps the generation, counts a recovery
/// attempt and leases them to `$2` for `$3` milliseconds by the database clock.
pub const CLAIM_EXPIRED: &str = concat!(
    "\
WITH due AS ( \
    SELECT op_id FROM operations \
    WHERE status = 'in_flight' \
      AND (lease_expires_at IS NULL OR lease_expires_at <= clock_timestamp()) \
    ORDER BY seq \
    LIMIT $1 \
    FOR UPDATE SKIP LOCKED \
) \
UPDATE operations o \
SET lease_generation = o.lease_generation + 1, \
    recovery_attempts = o.recovery_attempts + 1, \
    lease_owner = $2, \
    lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond', \
    updated_at = clock_timestamp() \
FROM due \
WHERE o.op_id = due.op_id \
RETURNING ",
    operation_columns!()
);

/// [`CLAIM_EXPIRED`] and [`MARK_UNCERTAIN`] in one statement (recovery, issue 21): up to `$1`
/// expired in-flight operations (none has a receipt: recording one makes it `receipted`)
/// claimed by `$2` for `$3` milliseconds, at a new generation, and marked uncertain.
pub const CLAIM_EXPIRED_UNCERTAIN: &str = concat!(
    "\
WITH due AS ( \
    SELECT op_id FROM operations \
    WHERE status = 'in_flight' AND receipt IS NULL \
      AND (lease_expires_at IS NULL OR lease_expires_at <= clock_timestamp()) \
    ORDER BY seq \
    LIMIT $1 \
    FOR UPDATE SKIP LOCKED \
) \
UPDATE operations o \
SET status = 'uncertain', \
    lease_generation = o.lease_generation + 1, \
    recovery_attempts = o.recovery_attempts + 1, \
    lease_owner = $2, \
    lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond', \
    updated_at = clock_timestamp() \
FROM due \
WHERE o.op_id = due.op_id \
RETURNING ",
    operation_columns!()
);

/// Extends a lease only at generation `$2` of an in-flight operation `$1`, by `$3`
/// milliseconds from now by the database clock; returns whether an abort was asked for.
pub const HEARTBEAT: &str = "\
UPDATE operations \
SET lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond', \
    updated_at = clock_timestamp() \
WHERE op_id = $1::uuid AND lease_generation = $2 AND status = 'in_flight' \
RETURNING cancel_requested";

/// Extends the leases of in-flight operations `$1` (ids as text) at generations `$2` (the same
/// order) by `$3` milliseconds, in one statement: a process's one heartbeat per interval
/// (issue 21, item 4). Returns each extended operation with its cancel flag; one not returned
/// is fenced.
pub const HEARTBEAT_ALL: &str = "\
UPDATE operations AS o \
SET lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond', \
    updated_at = clock_timestamp() \
FROM unnest($1::text[], $2::bigint[]) AS l(op_id, generation) \
WHERE o.op_id = l.op_id::uuid AND o.lease_generation = l.generation \
  AND o.status = 'in_flight' \
RETURNING o.op_id::text, o.lease_generation, o.cancel_requested";

/// Writes receipt `$3` (JSON text) once, only at generation `$2` of in-flight operation `$1`.
pub const RECORD_RECEIPT: &str = "\
UPDATE operations \
SET receipt = $3::json, status = 'receipted', updated_at = clock_timestamp() \
WHERE op_id = $1::uuid AND lease_generation = $2 AND status = 'in_flight' \
  AND receipt IS NULL";

/// Marks in-flight operation `$1` without a receipt uncertain, only at generation `$2`.
pub const MARK_UNCERTAIN: &str = "\
UPDATE operations \
SET status = 'uncertain', updated_at = clock_timestamp() \
WHERE op_id = $1::uuid AND lease_generation = $2 AND status = 'in_flight' \
  AND receipt IS NULL";

/// Counts one more recovery attempt on uncertain operation `$1`; returns the new count.
pub const COUNT_RECOVERY_ATTEMPT: &str = "\
UPDATE operations \
SET recovery_attempts = recovery_attempts + 1, updated_at = clock_timestamp() \
WHERE op_id = $1::uuid AND status = 'uncertain' \
RETURNING recovery_attempts";

/// Dead-letters operation `$1` (in flight or uncertain) with reason `$2`.
pub const DEAD_LETTER: &str = "\
UPDATE operations \
SET status = 'dead_letter', dead_letter_reason = $2, updated_at = clock_timestamp() \
WHERE op_id = $1::uuid AND status IN ('in_flight', 'uncertain')";

/// Records resolution `$2` (JSON text) of an uncertain or dead-lettered operation `$1`.
pub const RESOLVE: &str = "\
UPDATE operations \
SET status = 'resolved', resolution = $2::json, updated_at = clock_timestamp() \
WHERE op_id = $1::uuid AND status IN ('uncertain', 'dead_letter')";

/// One operation. `$1` op id.
pub const SELECT_OPERATION: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations o WHERE o.op_id = $1::uuid"
);

/// Every operation not applied or resolved, oldest first.
pub const SELECT_OPEN_OPERATIONS: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations o WHERE o.status NOT IN ('applied', 'resolved') ORDER BY o.seq"
);

/// The operations of Room `$1` (of status `$2` unless it is null), oldest first.
pub const SELECT_ROOM_OPERATIONS: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations o WHERE o.room_id = $1 AND ($2::text IS NULL OR o.status = $2) \
     ORDER BY o.seq"
);

/// Every operation of status `$1`, oldest first.
pub const SELECT_OPERATIONS_BY_STATUS: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations o WHERE o.status = $1 ORDER BY o.seq"
);

// --- Outbox ---------------------------------------------------------------------------------

/// Up to `$1` undelivered notifications, oldest first.
pub const SELECT_UNDELIVERED: &str = "\
SELECT room_id, body::text, attempts FROM outbox \
WHERE delivered_at IS NULL \
ORDER BY seq \
LIMIT $1";

/// Marks a notification delivered and numbers it, `$1` its id. A Room's deliveries are
/// numbered in the order they commit, so a stream that read up to a number never finds a
/// smaller one committed later (T5): the number is drawn while holding the Room's delivery
/// lock (a transaction-scoped advisory lock, which no Room commit takes), so a second process
/// marking one of the same Room waits for the first to commit before it draws its own.
pub const MARK_DELIVERED: &str = "\
WITH locked AS ( \
    SELECT pg_advisory_xact_lock(hashtextextended('agentroom.outbox.delivery:' || o.room_id, 0)) \
    FROM outbox o \
    WHERE o.notification_id = $1::uuid AND o.delivered_at IS NULL \
) \
UPDATE outbox SET delivered_at = clock_timestamp(), \
                  delivered_seq = nextval('outbox_delivery_seq') \
FROM locked \
WHERE notification_id = $1::uuid AND delivered_at IS NULL";

/// Counts a failed delivery attempt of undelivered notification `$1`.
pub const MARK_ATTEMPT: &str = "\
UPDATE outbox SET attempts = attempts + 1 \
WHERE notification_id = $1::uuid AND delivered_at IS NULL";

// --- Decided inputs, history and delivered notifications (migration 0006) -------------------

/// The unique index that lets a Room decide an operator input once: a commit deciding it
/// again fails with a unique violation on it, and the whole commit is rolled back.
pub const INPUT_ONCE_INDEX: &str = "room_history_input_once";

/// The primary key of `room_events`: a commit that persists an event whose id is stored
/// already violates it ([`COMMIT_ROOM_EVENT`]).
pub const EVENTS_PRIMARY_KEY: &str = "room_events_pkey";

/// The revision that decided an operator input of a Room. `$1` room, `$2` input id.
pub const SELECT_INPUT_DECIDED: &str = "\
SELECT revision FROM room_history WHERE room_id = $1 AND input_id = $2::uuid";

/// A Room's history rows after a revision, without their deltas. `$1` room, `$2` revision,
/// `$3` limit.
pub const SELECT_HISTORY: &str = "\
SELECT revision, input, event_id::text, input_id::text, log::text, at_ms \
FROM room_history \
WHERE room_id = $1 AND revision > $2 \
ORDER BY revision \
LIMIT $3";

/// A Room's delivered notifications after a delivery position, in delivery order. `$1`
/// room, `$2` position, `$3` limit.
pub const SELECT_DELIVERED: &str = "\
SELECT delivered_seq, body::text FROM outbox \
WHERE room_id = $1 AND delivered_seq IS NOT NULL AND delivered_seq > $2 \
ORDER BY delivered_seq \
LIMIT $3";

/// Whether a notification of a Room is in the outbox, and its delivery position if it was
/// delivered. `$1` room, `$2` notification id.
pub const SELECT_OUTBOX_POSITION: &str = "\
SELECT delivered_seq FROM outbox WHERE notification_id = $1::uuid AND room_id = $2";

// --- Artifact and source content (migration 0007) ------------------------------------------

/// Stores content of a Room unless the Room holds its digest already: one row affected when
/// stored, none when present (the row there keeps its media type). `$1` room, `$2` digest,
/// `$3` media type, `$4` bytes, `$5` created_at_ms. The size is the bytes' own length.
pub const INSERT_CONTENT: &str = "\
INSERT INTO room_contents (room_id, digest, media_type, bytes, size, created_at_ms) \
VALUES ($1, $2, $3, $4, octet_length($4), $5) \
ON CONFLICT (room_id, digest) DO NOTHING";

/// The content a digest addresses in a Room. `$1` room, `$2` digest.
pub const SELECT_CONTENT: &str = "\
SELECT media_type, bytes FROM room_contents WHERE room_id = $1 AND digest = $2";

/// A redaction removes content the Room's contributions named (issue 18).
pub const DELETE_CONTENT: &str = "DELETE FROM room_contents WHERE room_id = $1 AND digest = $2";

/// The history rows of Room `$1` whose delta holds one of the texts `$2` (each as its JSON
/// string holds it, without the quotes; the columns are `json`, which keeps the text
/// serde_json wrote): what a redaction of those memory texts may have to scrub (the caller
/// scrubs memory texts only, `agentroom_ports::scrub`).
pub const HISTORY_MENTIONING: &str = "\
SELECT h.revision, h.delta::text FROM room_history h \
WHERE h.room_id = $1 AND h.delta IS NOT NULL \
  AND EXISTS (SELECT 1 FROM unnest($2::text[]) AS t(text) WHERE strpos(h.delta::text, t.text) > 0)";

/// The snapshots of Room `$1` that hold one of the texts `$2` (as for [`HISTORY_MENTIONING`]).
pub const SNAPSHOTS_MENTIONING: &str = "\
SELECT s.revision, s.state::text FROM room_snapshots s \
WHERE s.room_id = $1 \
  AND EXISTS (SELECT 1 FROM unnest($2::text[]) AS t(text) WHERE strpos(s.state::text, t.text) > 0)";

/// A history row's delta with a redacted memory text scrubbed.
pub const SCRUB_HISTORY: &str =
    "UPDATE room_history SET delta = $3::json WHERE room_id = $1 AND revision = $2";

/// A snapshot with a redacted memory text scrubbed.
pub const SCRUB_SNAPSHOT: &str =
    "UPDATE room_snapshots SET state = $3::json WHERE room_id = $1 AND revision = $2";

/// The channel migration 0010's triggers notify with a Room's id when an event is persisted
/// for it or it is created; a host LISTENs on it (issue 21).
pub const ROOM_CHANNEL: &str = "agentroom_rooms";
