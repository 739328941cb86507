DROP INDEX IF EXISTS ix_outbox_status_sent ON outbox;
DROP INDEX IF EXISTS ix_callback_log_status_processed ON callback_log;
