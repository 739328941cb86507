-- callback_event: the intake's dedupe, kept apart from the payloads. Every
-- accepted callback's (source, event_id) and log_id, written in the same
-- transaction as its callback_log row; a request whose event is already
-- here is a duplicate of that log_id, even once retention deleted the
-- callback_log row (scheduler.retention.max_age). Kept for
-- scheduler.retention.dedupe_max_age, and never while its callback_log row
-- is still there. The columns compare as callback_log's do (migration 006:
-- event_id byte for byte).

-- READ COMMITTED for the backfill below: golang-migrate runs this file as
-- one multi-statement exec on one connection of its own, which the
-- store's session settings (connector.go) do not reach. Under the
-- server's default REPEATABLE READ the INSERT ... SELECT would take a
-- shared next-key lock on every callback_log row it reads, and on the gap
-- after the last one, holding off every intake INSERT of the gateways
-- still running (a rolling upgrade) until it ends; under READ COMMITTED
-- it reads callback_log as a consistent read, without locks. (The store
-- needs binlog_format ROW or MIXED for READ COMMITTED already.)
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;

CREATE TABLE IF NOT EXISTS callback_event (
    source      VARCHAR(64)    NOT NULL,
    event_id    VARBINARY(191) NOT NULL,
    log_id      BIGINT         NOT NULL,
    received_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (source, event_id),
    -- Retention by age.
    KEY ix_callback_event_received (received_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Every callback stored before: its event. One pass over callback_log,
-- proportional to its rows, without locks on it (docs/upgrading.md). A
-- callback an older gateway stores meanwhile gets its event when
-- retention deletes it (keepEvents, internal/store/intake.go).
INSERT INTO callback_event (source, event_id, log_id, received_at)
    SELECT source, event_id, id, received_at FROM callback_log
    ON DUPLICATE KEY UPDATE log_id = callback_event.log_id;
