CREATE INDEX ix_outbox_callback ON outbox (callback_log_id);
