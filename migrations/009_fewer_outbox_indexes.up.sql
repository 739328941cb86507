-- Every processed callback inserts two outbox rows: each secondary index
-- costs an entry per row. ix_outbox_callback goes: a callback's rows are
-- found by their message_id, whose prefix is the callback's ("cb<log
-- id>."), in the unique key.
ALTER TABLE outbox DROP INDEX ix_outbox_callback;
