-- The planning store (seed 000, issue 3): plans and their tasks, scoped to a Room.
-- Keys are identities, so creation order is key order; tasks are never deleted.

CREATE TABLE planning_plans (
    plan_key     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    plan_id      text   NOT NULL UNIQUE,
    room_id      text   NOT NULL,
    name         text   NOT NULL,
    description  text   NOT NULL,
    -- The column vocabulary as a JSON array of strings (a comma inside a name survives).
    columns      jsonb  NOT NULL CHECK (jsonb_typeof(columns) = 'array'),
    -- Set for a coordinator objective's board; NULL for a standalone plan.
    objective_id uuid   NULL,
    created_ms   bigint NOT NULL
);

-- plan/list and plan/board without a plan: the Room's plans in creation order.
CREATE INDEX planning_plans_room ON planning_plans (room_id, plan_key);

CREATE TABLE planning_tasks (
    task_key    bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    plan_key    bigint  NOT NULL REFERENCES planning_plans (plan_key),
    task_id     text    NOT NULL UNIQUE,
    title       text    NOT NULL,
    column_ix   integer NOT NULL CHECK (column_ix >= 0),
    description text    NOT NULL,
    assignee    text    NOT NULL,
    -- Ids of tasks of the same plan this one waits on, in the order given.
    deps        text[]  NOT NULL,
    metadata    jsonb   NOT NULL CHECK (jsonb_typeof(metadata) = 'object'),
    created_ms  bigint  NOT NULL,
    updated_ms  bigint  NOT NULL
);

-- A board, or task/list by plan: that plan's rows in creation order, index-only.
CREATE INDEX planning_tasks_board ON planning_tasks (plan_key, task_key)
    INCLUDE (task_id, title, column_ix, assignee);

-- task/list by plan and status: that plan's rows of one column in creation order, index-only.
CREATE INDEX planning_tasks_column ON planning_tasks (plan_key, column_ix, task_key)
    INCLUDE (task_id, title, assignee);
