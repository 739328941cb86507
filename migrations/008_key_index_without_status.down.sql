ALTER TABLE callback_log
    DROP INDEX ix_callback_log_key,
    ADD INDEX ix_callback_log_key (business_key, kind, status, id);
