-- A payment's whole life (docs/guarantees.md, "A payment's life: the rule table").
-- orders.payment_status also takes PARTIALLY_REFUNDED (18 characters: the
-- column grows from 16 to 32), REFUNDED and CLOSED. Existing orders keep
-- their status and get refunded_amount 0 and no dispute: they are as they
-- were.
ALTER TABLE orders
    MODIFY payment_status VARCHAR(32) NOT NULL DEFAULT 'UNPAID',
    ADD COLUMN refunded_amount BIGINT NOT NULL DEFAULT 0 COMMENT 'minor units' AFTER paid_at,
    ADD COLUMN dispute_status VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NULL AFTER refunded_amount,
    ADD CONSTRAINT ck_orders_refunded_amount CHECK (refunded_amount >= 0),
    ADD CONSTRAINT ck_orders_dispute_status CHECK (dispute_status IN ('OPEN', 'WON', 'LOST'));

-- Every payment a platform reported for an order (the one that paid it, a
-- second one, a failed one), by its platform number: a refund or dispute
-- that names only its payment finds its order here.
CREATE TABLE IF NOT EXISTS payments (
    order_code      VARCHAR(191)   NOT NULL,
    payment_no      VARBINARY(191) NOT NULL,
    source          VARCHAR(64)    NOT NULL,
    -- SUCCEEDED or FAILED.
    status          VARCHAR(16)    NOT NULL,
    -- 1: this payment paid the order.
    paying          TINYINT(1)     NOT NULL DEFAULT 0,
    amount          BIGINT         NOT NULL COMMENT 'minor units',
    currency        CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- The callbacks that recorded it first and last changed it.
    callback_log_id BIGINT         NOT NULL,
    last_log_id     BIGINT         NOT NULL,
    created_at      DATETIME(6)    NOT NULL,
    updated_at      DATETIME(6)    NOT NULL,
    PRIMARY KEY (order_code, payment_no),
    KEY ix_payments_payment_no (payment_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Each platform refund once, by its refund number, however often it is
-- sent. amount is the platform's figure (for a running total without a
-- refund number, "total:<figure>", the total); counted is what it added to
-- orders.refunded_amount; matched is what of it an earlier running total
-- had already counted.
CREATE TABLE IF NOT EXISTS refunds (
    order_code      VARCHAR(191)   NOT NULL,
    refund_no       VARBINARY(191) NOT NULL,
    payment_no      VARBINARY(191) NULL,
    source          VARCHAR(64)    NOT NULL,
    -- SUCCEEDED, FAILED or REVERSED.
    status          VARCHAR(16)    NOT NULL,
    amount          BIGINT         NOT NULL COMMENT 'minor units',
    counted         BIGINT         NOT NULL DEFAULT 0,
    matched         BIGINT         NOT NULL DEFAULT 0,
    currency        CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    reason          VARCHAR(255)   NULL,
    callback_log_id BIGINT         NOT NULL,
    last_log_id     BIGINT         NOT NULL,
    created_at      DATETIME(6)    NOT NULL,
    updated_at      DATETIME(6)    NOT NULL,
    PRIMARY KEY (order_code, refund_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Each dispute (chargeback) once, by its platform id. counted is what a
-- LOST dispute took from what remained of the order (given back if it is
-- WON after all).
CREATE TABLE IF NOT EXISTS disputes (
    order_code      VARCHAR(191)   NOT NULL,
    dispute_id      VARBINARY(191) NOT NULL,
    payment_no      VARBINARY(191) NULL,
    source          VARCHAR(64)    NOT NULL,
    -- OPEN, WON or LOST.
    status          VARCHAR(8)     NOT NULL,
    amount          BIGINT         NOT NULL COMMENT 'minor units',
    counted         BIGINT         NOT NULL DEFAULT 0,
    currency        CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    callback_log_id BIGINT         NOT NULL,
    last_log_id     BIGINT         NOT NULL,
    created_at      DATETIME(6)    NOT NULL,
    updated_at      DATETIME(6)    NOT NULL,
    PRIMARY KEY (order_code, dispute_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The orders paid before this migration: their paying payment, so that a
-- refund or dispute that names only its payment (Stripe, Adyen, Shopify)
-- finds its order. Its source is the latest callback of the order's key
-- that names it, else '' (an order paid by hand); its callback is 0.
INSERT IGNORE INTO payments (order_code, payment_no, source, status, paying, amount, currency,
                             callback_log_id, last_log_id, created_at, updated_at)
SELECT o.order_code, o.payment_no,
       COALESCE((SELECT l.source FROM callback_log l
                  WHERE l.kind = 'payment' AND l.business_key = o.order_code
                  ORDER BY l.id DESC LIMIT 1), ''),
       'SUCCEEDED', 1, o.amount, o.currency, 0, 0,
       COALESCE(o.paid_at, UTC_TIMESTAMP(6)), UTC_TIMESTAMP(6)
  FROM orders o
 WHERE o.payment_status = 'PAID' AND o.payment_no IS NOT NULL AND o.payment_no <> '';

-- A callback that came before what it depends on (its order, its payment)
-- waits, retried with its backoff, without holding up the later callbacks
-- of its key (callback.NotYet).
ALTER TABLE callback_log ADD COLUMN awaiting TINYINT(1) NOT NULL DEFAULT 0;
