-- Asking the platforms what never arrived (docs/reconciliation.md).
-- orders.payment_source names the source whose platform carries the
-- order's payment (set by whoever creates the order; NULL: never asked);
-- orders.created_at is when it was created (existing orders: the
-- migration's time, so they are asked about no sooner than new ones).
ALTER TABLE orders
    ADD COLUMN payment_source VARCHAR(64) NULL AFTER dispute_status,
    ADD COLUMN created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) AFTER payment_source,
    ADD KEY ix_orders_reconcile (payment_status, payment_source, created_at);

-- Where a callback came from: notify (a platform sent it) or reconcile
-- (callgate asked the platform and stored its answer).
ALTER TABLE callback_log
    ADD COLUMN origin VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'notify';

-- One row per order asked about: when it is asked next, how often it was,
-- what the last answer was, and when callgate gave up (then it is listed
-- for on-call as unresolved).
CREATE TABLE IF NOT EXISTS reconcile_orders (
    order_code   VARCHAR(64)  NOT NULL,
    source       VARCHAR(64)  NOT NULL,
    queries      INT          NOT NULL DEFAULT 0,
    next_at      DATETIME(6)  NOT NULL,
    last_outcome VARCHAR(32)  NOT NULL,
    last_error   VARCHAR(255) NULL,
    -- The callback a query answer stored (NULL: none yet).
    found_log_id BIGINT       NULL,
    gave_up_at   DATETIME(6)  NULL,
    updated_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (order_code),
    KEY ix_reconcile_orders_due (gave_up_at, next_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
