-- Back to unpartitioned tables with their former keys: each ALTER copies
-- its table, as the up migration did. UNIQUE (source, event_id) on
-- callback_log and UNIQUE (message_id) on outbox come back: the intake of
-- 025 keeps no two callback_log rows of one event (it deletes its own row
-- when callback_event already names another), and a notification's
-- message_id is written once (the handlers are idempotent), so neither
-- key finds duplicates.
ALTER TABLE callback_log
    DROP PRIMARY KEY, ADD PRIMARY KEY (id),
    DROP KEY ix_callback_log_source_event, ADD UNIQUE KEY uq_callback_log_source_event (source, event_id),
    DROP COLUMN retain_day
    REMOVE PARTITIONING;

ALTER TABLE callback_attempt
    DROP PRIMARY KEY, ADD PRIMARY KEY (id),
    DROP COLUMN retain_day
    REMOVE PARTITIONING;

ALTER TABLE outbox
    DROP PRIMARY KEY, ADD PRIMARY KEY (id),
    DROP KEY ix_outbox_message_id, ADD UNIQUE KEY uq_outbox_message_id (message_id),
    DROP COLUMN retain_day
    REMOVE PARTITIONING;
