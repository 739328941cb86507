DROP TABLE IF EXISTS admin_audit;
DROP TABLE IF EXISTS replay_job;
ALTER TABLE callback_log DROP COLUMN IF EXISTS attempts_base;
