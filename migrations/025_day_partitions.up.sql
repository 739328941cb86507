-- Day partitions (issue 40, item 1): callback_log, callback_attempt and
-- outbox partitioned BY RANGE COLUMNS(retain_day), one partition per UTC
-- day, so that a day can later be dropped in one statement (item 2).
--
-- retain_day is the UTC day a row is written: DEFAULT (CURRENT_DATE) in
-- the store's sessions, which run with time_zone '+00:00' (NormalizeDSN,
-- internal/store/store.go). Existing rows get their own day
-- (callback_log.received_at, callback_attempt.started_at,
-- outbox.created_at, all UTC): the column is added with that expression
-- as its default, so the one copy of each table fills it, and the default
-- then becomes CURRENT_DATE (metadata only).
--
-- Every unique key of a partitioned table must hold the partitioning
-- column: the primary keys become (id, retain_day) (AUTO_INCREMENT id
-- stays first); callback_log's UNIQUE (source, event_id) goes, dedupe is
-- callback_event's (migration 024, internal/store/intake.go), and a plain
-- key on (source, event_id) stays for the console's search by event id;
-- outbox's UNIQUE (message_id) becomes a plain key (rows are found and
-- marked SENT by message_id).
--
-- The partitions, whatever the data: p_old, every row of a day before
-- the migration's; one partition per UTC day from the migration's day
-- through 7 days later (pYYYYMMDD, VALUES LESS THAN the next day); and
-- p_future (MAXVALUE), empty. The migration's own day has its partition
-- at once, so nothing written after it waits in p_future, and the
-- worker's partitions job (scheduler.partitions,
-- internal/store/partitions.go), which first runs an interval after a
-- worker starts, splits an empty p_future (no row to copy) as long as it
-- keeps up.
--
-- Each ALTER copies its table (MariaDB cannot partition a table in place),
-- under a shared lock: reads go on, writes wait until it ends. See
-- docs/upgrading.md for how long it takes per million rows.

-- The day of CURRENT_DATE below and of every retain_day filled: UTC.
-- golang-migrate runs this file on a connection of its own, which the
-- store's session settings (connector.go) do not reach.
SET SESSION time_zone = '+00:00';
-- READ COMMITTED for the events' backfill below, as in migration 024: a
-- consistent read of callback_log, without locks on it.
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- callback_log's unique key goes: the intake then dedupes on
-- callback_event alone. A callback stored by a gateway older than 024
-- (a rolling upgrade to 024: it wrote no event) gets its event now, so
-- that a resend of it stays a duplicate.
INSERT INTO callback_event (source, event_id, log_id, received_at)
    SELECT source, event_id, id, received_at FROM callback_log
    ON DUPLICATE KEY UPDATE log_id = callback_event.log_id;

SET @callgate_day = CURRENT_DATE;
SET @callgate_days = (WITH RECURSIVE d (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM d WHERE n < 7)
    SELECT GROUP_CONCAT('PARTITION p', DATE_FORMAT(@callgate_day + INTERVAL n DAY, '%Y%m%d'),
        ' VALUES LESS THAN (''', DATE_FORMAT(@callgate_day + INTERVAL n + 1 DAY, '%Y-%m-%d'), ''')'
        ORDER BY n SEPARATOR ', ') FROM d);
SET @callgate_partitions = CONCAT(' PARTITION BY RANGE COLUMNS(retain_day) (PARTITION p_old VALUES LESS THAN (''',
    DATE_FORMAT(@callgate_day, '%Y-%m-%d'), '''), ', @callgate_days, ', PARTITION p_future VALUES LESS THAN (MAXVALUE))');

SET @callgate_ddl = CONCAT('ALTER TABLE callback_log',
    ' ADD COLUMN retain_day DATE NOT NULL DEFAULT (DATE(received_at)),',
    ' DROP PRIMARY KEY, ADD PRIMARY KEY (id, retain_day),',
    ' DROP KEY uq_callback_log_source_event, ADD KEY ix_callback_log_source_event (source, event_id)',
    @callgate_partitions);
PREPARE callgate_stmt FROM @callgate_ddl;
EXECUTE callgate_stmt;
DEALLOCATE PREPARE callgate_stmt;
ALTER TABLE callback_log ALTER COLUMN retain_day SET DEFAULT (CURRENT_DATE);

SET @callgate_ddl = CONCAT('ALTER TABLE callback_attempt',
    ' ADD COLUMN retain_day DATE NOT NULL DEFAULT (DATE(started_at)),',
    ' DROP PRIMARY KEY, ADD PRIMARY KEY (id, retain_day)',
    @callgate_partitions);
PREPARE callgate_stmt FROM @callgate_ddl;
EXECUTE callgate_stmt;
DEALLOCATE PREPARE callgate_stmt;
ALTER TABLE callback_attempt ALTER COLUMN retain_day SET DEFAULT (CURRENT_DATE);

SET @callgate_ddl = CONCAT('ALTER TABLE outbox',
    ' ADD COLUMN retain_day DATE NOT NULL DEFAULT (DATE(created_at)),',
    ' DROP PRIMARY KEY, ADD PRIMARY KEY (id, retain_day),',
    ' DROP KEY uq_outbox_message_id, ADD KEY ix_outbox_message_id (message_id)',
    @callgate_partitions);
PREPARE callgate_stmt FROM @callgate_ddl;
EXECUTE callgate_stmt;
DEALLOCATE PREPARE callgate_stmt;
ALTER TABLE outbox ALTER COLUMN retain_day SET DEFAULT (CURRENT_DATE);
