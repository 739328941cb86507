-- Retention reads the oldest settled rows first; without these indexes it
-- walks every SUCCESS callback / SENT outbox row to find none old enough.
CREATE INDEX IF NOT EXISTS ix_callback_log_status_processed ON callback_log (status, processed_at);
CREATE INDEX IF NOT EXISTS ix_outbox_status_sent ON outbox (status, sent_at);
