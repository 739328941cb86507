-- Per-key order reads a key's callbacks by (business_key, kind) and checks
-- their status on the row. Keeping status out of the index means a status
-- change (PENDING -> SUCCESS, for every callback) no longer rewrites this
-- index's entry: one secondary index fewer to maintain per settle.
ALTER TABLE callback_log
    DROP INDEX ix_callback_log_key,
    ADD INDEX ix_callback_log_key (business_key, kind, id);
