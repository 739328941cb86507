-- callback_log: every callback a platform sent us, byte for byte, and where it
-- stands. A row is written before the platform gets its 200.
CREATE TABLE IF NOT EXISTS callback_log (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    source          VARCHAR(64)  NOT NULL,
    kind            VARCHAR(32)  NOT NULL,
    event_id        VARCHAR(191) NOT NULL,
    business_key    VARCHAR(191) NOT NULL,
    status          VARCHAR(16)  NOT NULL DEFAULT 'PENDING',
    attempts        INT          NOT NULL DEFAULT 0,
    last_error      TEXT         NULL,
    payload         MEDIUMBLOB   NOT NULL,
    headers         JSON         NULL,
    trace_id        CHAR(32)     NOT NULL,
    received_at     DATETIME(6)  NOT NULL,
    processed_at    DATETIME(6)  NULL,
    next_attempt_at DATETIME(6)  NULL,
    PRIMARY KEY (id),
    -- The idempotency key: a platform re-sending the same event gets the same row.
    UNIQUE KEY uq_callback_log_source_event (source, event_id),
    -- Compensation's claim, per kind: PENDING rows of a kind that are due.
    -- kind sits before next_attempt_at so that the locking read of one kind
    -- never walks (and locks) the due rows of another.
    KEY ix_callback_log_status_due (status, kind, next_attempt_at),
    -- Per-key ordering (is an earlier callback of this key still PENDING?)
    -- and operator search by key.
    KEY ix_callback_log_key (business_key, kind, status, id),
    -- Operator list filtered by source and status, newest first.
    KEY ix_callback_log_source_status (source, status, id),
    -- Operator list filtered by status only, newest first; retention by age.
    KEY ix_callback_log_status_id (status, id),
    KEY ix_callback_log_received (received_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Example business tables the worker's demo handlers update.
CREATE TABLE IF NOT EXISTS orders (
    order_code     VARCHAR(64) NOT NULL,
    user_id        BIGINT      NOT NULL,
    amount         BIGINT      NOT NULL COMMENT 'minor units',
    payment_status VARCHAR(16) NOT NULL DEFAULT 'UNPAID',
    payment_no     VARCHAR(128) NULL,
    paid_at        DATETIME(6) NULL,
    PRIMARY KEY (order_code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS shipments (
    waybill_no VARCHAR(64) NOT NULL,
    order_code VARCHAR(64) NOT NULL,
    status     VARCHAR(32) NOT NULL,
    last_seq   BIGINT      NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    PRIMARY KEY (waybill_no),
    KEY ix_shipments_order (order_code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS shipment_events (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    waybill_no  VARCHAR(64)  NOT NULL,
    seq         BIGINT       NOT NULL,
    status      VARCHAR(32)  NOT NULL,
    location    VARCHAR(255) NOT NULL DEFAULT '',
    occurred_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_shipment_events_waybill_seq (waybill_no, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
