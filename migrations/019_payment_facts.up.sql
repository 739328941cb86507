-- Money that is right in any order (docs/guarantees.md, "A payment's life:
-- facts, the fold and the difference"). Every payment attempt, refund,
-- running total, dispute stage and close a platform reports is kept once
-- as a fact, dated by the platform's clock; the order's money columns are
-- derived from all of an order's facts. The payments, refunds and
-- disputes tables, which held a state mutated in arrival order, become
-- facts (undated: occurred_at NULL, taken in their arrival order) and go.
CREATE TABLE IF NOT EXISTS payment_facts (
    order_code      VARCHAR(191)   NOT NULL,
    -- The fact's identity within its order (recorded once): payment/<no>/<status>,
    -- refund/<no>/<status>, total/<payment>/<refund>/<total>/<time>,
    -- dispute/<id>/<status>/<time>, close.
    fact_key        VARBINARY(400) NOT NULL,
    -- payment, refund, total, dispute or close.
    kind            VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- The platform's number of what it is about: the payment number, the
    -- refund number, the dispute id ('' for a close or a total naming no refund).
    ref             VARBINARY(191) NOT NULL,
    -- The payment a refund, total or dispute is about ('' : the paying one).
    payment_no      VARBINARY(191) NOT NULL DEFAULT '',
    -- SUCCEEDED, FAILED, REVERSED (refund), OPEN, WON, LOST (dispute), '' (close).
    status          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    amount          BIGINT         NOT NULL COMMENT 'minor units; a total: everything refunded so far',
    currency        CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    reason          VARCHAR(255)   NULL,
    -- The platform's time of what happened; NULL when it gives none.
    occurred_at     DATETIME(6)    NULL,
    -- When a refund was created (Stripe), if the platform says.
    initiated_at    DATETIME(6)    NULL,
    source          VARCHAR(64)    NOT NULL,
    -- The arrival order: the callback that reported it, its place in it.
    callback_log_id BIGINT         NOT NULL,
    received_at     DATETIME(6)    NOT NULL,
    created_at      DATETIME(6)    NOT NULL,
    PRIMARY KEY (order_code, fact_key),
    KEY ix_payment_facts_ref (ref, kind)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- chargeback_amount: what lost disputes took; warehouse_cancelled: the
-- order's warehouse.cancel was published (once in its life).
ALTER TABLE orders
    ADD COLUMN chargeback_amount BIGINT NOT NULL DEFAULT 0 COMMENT 'minor units' AFTER refunded_amount,
    ADD COLUMN warehouse_cancelled TINYINT(1) NOT NULL DEFAULT 0 AFTER dispute_status;

UPDATE orders o SET o.chargeback_amount = (SELECT COALESCE(SUM(d.counted), 0) FROM disputes d
    WHERE d.order_code = o.order_code AND d.status = 'LOST');
UPDATE orders SET warehouse_cancelled = 1
    WHERE payment_status = 'REFUNDED' OR (payment_status IN ('PAID', 'PARTIALLY_REFUNDED') AND refunded_amount + chargeback_amount >= amount);

INSERT IGNORE INTO payment_facts (order_code, fact_key, kind, ref, payment_no, status, amount, currency, reason, occurred_at, initiated_at,
        source, callback_log_id, received_at, created_at)
    SELECT order_code, CONCAT('payment/', payment_no, '/', status), 'payment', payment_no, payment_no, status, amount, currency, NULL, NULL, NULL,
        source, callback_log_id, created_at, created_at FROM payments;
-- A refund recorded from a running total without a refund number
-- ("total:<n>") is the refund it stood for.
INSERT IGNORE INTO payment_facts (order_code, fact_key, kind, ref, payment_no, status, amount, currency, reason, occurred_at, initiated_at,
        source, callback_log_id, received_at, created_at)
    SELECT order_code, CONCAT('refund/', refund_no, '/', status), 'refund', refund_no, COALESCE(payment_no, ''), status, amount, currency, reason,
        NULL, NULL, source, callback_log_id, created_at, created_at FROM refunds;
INSERT IGNORE INTO payment_facts (order_code, fact_key, kind, ref, payment_no, status, amount, currency, reason, occurred_at, initiated_at,
        source, callback_log_id, received_at, created_at)
    SELECT order_code, CONCAT('dispute/', dispute_id, '/', status, '/'), 'dispute', dispute_id, COALESCE(payment_no, ''), status, amount, currency,
        NULL, NULL, NULL, source, callback_log_id, created_at, created_at FROM disputes;
-- A close left only its order's status.
INSERT IGNORE INTO payment_facts (order_code, fact_key, kind, ref, payment_no, status, amount, currency, reason, occurred_at, initiated_at,
        source, callback_log_id, received_at, created_at)
    SELECT order_code, 'close', 'close', '', '', '', 0, '', NULL, NULL, NULL, 'migration', 0, NOW(6), NOW(6) FROM orders
    WHERE payment_status = 'CLOSED';

DROP TABLE payments;
DROP TABLE refunds;
DROP TABLE disputes;
