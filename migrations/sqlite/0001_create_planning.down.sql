DROP TABLE planning_tasks;
DROP TABLE planning_plans;
