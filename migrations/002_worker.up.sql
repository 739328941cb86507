-- callback_attempt: one row per attempt at processing a callback, whatever
-- its outcome, so an operator sees the whole history of a log.
CREATE TABLE IF NOT EXISTS callback_attempt (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    log_id      BIGINT       NOT NULL,
    attempt     INT          NOT NULL,
    started_at  DATETIME(6)  NOT NULL,
    finished_at DATETIME(6)  NOT NULL,
    -- SUCCESS, RETRY (retryable error, will be tried again) or FAILED.
    outcome     VARCHAR(16)  NOT NULL,
    error       TEXT         NULL,
    worker_id   VARCHAR(128) NOT NULL,
    PRIMARY KEY (id),
    KEY ix_callback_attempt_log (log_id, attempt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- outbox: downstream notifications written in the same transaction as the
-- business change, published after commit (fast path) or by the relay.
CREATE TABLE IF NOT EXISTS outbox (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    callback_log_id BIGINT       NOT NULL,
    exchange        VARCHAR(255) NOT NULL,
    routing_key     VARCHAR(255) NOT NULL,
    -- Stable id a subscriber dedupes on: the same notification always has
    -- the same message_id, however often it is published.
    message_id      VARCHAR(191) NOT NULL,
    payload         MEDIUMBLOB   NOT NULL,
    headers         JSON         NULL,
    status          VARCHAR(16)  NOT NULL DEFAULT 'PENDING',
    attempts        INT          NOT NULL DEFAULT 0,
    last_error      TEXT         NULL,
    created_at      DATETIME(6)  NOT NULL,
    sent_at         DATETIME(6)  NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_outbox_message_id (message_id),
    -- Relay scan: PENDING rows, oldest first.
    KEY ix_outbox_status_id (status, id),
    -- Lineage: what a callback produced.
    KEY ix_outbox_callback (callback_log_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- callback_key: one row per (kind, business key), locked by the transaction
-- that processes a callback of that key, so that two callbacks of one key
-- never run at the same time, across any number of workers.
CREATE TABLE IF NOT EXISTS callback_key (
    kind         VARCHAR(32)  NOT NULL,
    business_key VARCHAR(191) NOT NULL,
    locked_at    DATETIME(6)  NOT NULL,
    PRIMARY KEY (kind, business_key),
    KEY ix_callback_key_locked (locked_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
