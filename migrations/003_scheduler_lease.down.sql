DROP TABLE IF EXISTS scheduler_lease;
