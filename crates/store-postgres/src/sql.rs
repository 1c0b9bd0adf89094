//! Every SQL statement the planning store runs, as constants: one place to read the queries,
//! and the exact text the query-plan test EXPLAINs. Each runs as a prepared statement (sqlx
//! caches it per connection); each write is one statement, so one round trip, except a
//! dependency update, which locks its plan first.
//!
//! Room scoping: every statement names the Room, so a plan of another Room is no plan.

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
