-- Reverts 0001_adopt_operations: destroys every recorded call, its lease and its receipt
-- (`agentroom migrate down --workflows`, which asks for --confirm-destroy-workflow-state and
-- refuses while the planner's migrations are applied: the planner's commit writes this table).
DROP TABLE IF EXISTS operations;
