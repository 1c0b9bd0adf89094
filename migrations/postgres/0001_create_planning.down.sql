-- Reverts 0001_create_planning: destroys every planning plan and task (the CLI asks for
-- --confirm-destroy-planner-state first). The indexes go with their tables.

DROP TABLE planning_tasks;
DROP TABLE planning_plans;
