DROP TABLE IF EXISTS intake_barrier;
