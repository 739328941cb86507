-- Back to the tables of 015: each payment, refund and dispute's latest
-- fact becomes its row (a payment that succeeded keeps SUCCEEDED; the
-- order's payment_no is the paying one); running totals and closes were
-- never rows, and the order's columns keep what the facts had derived.
CREATE TABLE IF NOT EXISTS payments (
    order_code      VARCHAR(191)   NOT NULL,
    payment_no      VARBINARY(191) NOT NULL,
    source          VARCHAR(64)    NOT NULL,
    status          VARCHAR(16)    NOT NULL,
    paying          TINYINT(1)     NOT NULL DEFAULT 0,
    amount          BIGINT         NOT NULL COMMENT 'minor units',
    currency        CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    callback_log_id BIGINT         NOT NULL,
    last_log_id     BIGINT         NOT NULL,
    created_at      DATETIME(6)    NOT NULL,
    updated_at      DATETIME(6)    NOT NULL,
    PRIMARY KEY (order_code, payment_no),
    KEY ix_payments_payment_no (payment_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS refunds (
    order_code      VARCHAR(191)   NOT NULL,
    refund_no       VARBINARY(191) NOT NULL,
    payment_no      VARBINARY(191) NULL,
    source          VARCHAR(64)    NOT NULL,
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
CREATE TABLE IF NOT EXISTS disputes (
    order_code      VARCHAR(191)   NOT NULL,
    dispute_id      VARBINARY(191) NOT NULL,
    payment_no      VARBINARY(191) NULL,
    source          VARCHAR(64)    NOT NULL,
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

-- Facts in arrival order: the last one written of each row stays.
INSERT INTO payments (order_code, payment_no, source, status, paying, amount, currency, callback_log_id, last_log_id, created_at, updated_at)
    SELECT f.order_code, f.ref, f.source, f.status, 0, f.amount, f.currency, f.callback_log_id, f.callback_log_id, f.created_at, f.created_at
    FROM payment_facts f WHERE f.kind = 'payment' ORDER BY f.callback_log_id
    ON DUPLICATE KEY UPDATE payments.amount = IF(payments.status = 'SUCCEEDED', payments.amount, VALUES(amount)),
        payments.status = IF(payments.status = 'SUCCEEDED', payments.status, VALUES(status)), payments.last_log_id = VALUES(last_log_id);
UPDATE payments p JOIN orders o ON o.order_code = p.order_code AND o.payment_no = p.payment_no SET p.paying = 1;
INSERT INTO refunds (order_code, refund_no, payment_no, source, status, amount, counted, matched, currency, reason, callback_log_id, last_log_id,
        created_at, updated_at)
    SELECT f.order_code, f.ref, NULLIF(f.payment_no, ''), f.source, f.status, f.amount, 0, 0, f.currency, f.reason, f.callback_log_id,
        f.callback_log_id, f.created_at, f.created_at
    FROM payment_facts f WHERE f.kind = 'refund' ORDER BY f.callback_log_id
    ON DUPLICATE KEY UPDATE refunds.status = VALUES(status), refunds.reason = VALUES(reason), refunds.last_log_id = VALUES(last_log_id);
INSERT INTO disputes (order_code, dispute_id, payment_no, source, status, amount, counted, currency, callback_log_id, last_log_id, created_at, updated_at)
    SELECT f.order_code, f.ref, NULLIF(f.payment_no, ''), f.source, f.status, f.amount, 0, f.currency, f.callback_log_id, f.callback_log_id,
        f.created_at, f.created_at
    FROM payment_facts f WHERE f.kind = 'dispute' ORDER BY f.callback_log_id
    ON DUPLICATE KEY UPDATE disputes.status = VALUES(status), disputes.amount = VALUES(amount), disputes.last_log_id = VALUES(last_log_id);
-- What 015's counted columns held, so far as the order's columns say it.
UPDATE refunds SET counted = amount WHERE status = 'SUCCEEDED';
UPDATE disputes d JOIN orders o ON o.order_code = d.order_code SET d.counted = LEAST(d.amount, o.chargeback_amount) WHERE d.status = 'LOST';

DROP TABLE payment_facts;
ALTER TABLE orders DROP COLUMN warehouse_cancelled, DROP COLUMN chargeback_amount;
