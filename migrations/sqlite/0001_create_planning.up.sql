-- The planning messages' plans and tasks (issue 3). Plans are immutable once created; tasks
-- are never deleted. Keys increase in creation order, which is the order every list shows.

CREATE TABLE planning_plans (
    plan_key     INTEGER PRIMARY KEY,
    plan_id      TEXT    NOT NULL UNIQUE,
    room_id      TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    description  TEXT    NOT NULL,
    columns      TEXT    NOT NULL,          -- JSON array of column names, in order
    objective_id TEXT,                      -- set for a coordinator objective's board
    created_ms   INTEGER NOT NULL
) STRICT;

CREATE INDEX planning_plans_by_room ON planning_plans (room_id, plan_key);

-- Tasks are clustered by plan: a board reads one contiguous range of this table. task_key
-- counts up within its plan (creation order); task_id is the id clients see.
CREATE TABLE planning_tasks (
    plan_key    INTEGER NOT NULL REFERENCES planning_plans (plan_key),
    task_key    INTEGER NOT NULL,
    task_id     TEXT    NOT NULL UNIQUE,
    title       TEXT    NOT NULL,
    column_ix   INTEGER NOT NULL,           -- index into the plan's columns
    assignee    TEXT    NOT NULL,
    description TEXT    NOT NULL,
    deps        TEXT    NOT NULL,           -- JSON array of task ids of the same plan
    metadata    TEXT    NOT NULL,           -- JSON object
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    PRIMARY KEY (plan_key, task_key)
) STRICT, WITHOUT ROWID;

-- A list filtered by status reads one (plan, column) range of this index, which covers
-- every column a list shows.
CREATE INDEX planning_tasks_column
    ON planning_tasks (plan_key, column_ix, task_key, task_id, title, assignee);
