ALTER TABLE callback_log DROP COLUMN retry_after;
