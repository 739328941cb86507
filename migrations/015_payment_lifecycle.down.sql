-- Orders refunded or closed keep those statuses, which an older callgate
-- does not know; PARTIALLY_REFUNDED does not fit the older column and
-- becomes PAID (README, "Upgrading to a payment's whole life").
ALTER TABLE callback_log DROP COLUMN awaiting;
DROP TABLE IF EXISTS disputes;
DROP TABLE IF EXISTS refunds;
DROP TABLE IF EXISTS payments;
UPDATE orders SET payment_status = 'PAID' WHERE payment_status = 'PARTIALLY_REFUNDED';
ALTER TABLE orders
    MODIFY payment_status VARCHAR(16) NOT NULL DEFAULT 'UNPAID',
    DROP CONSTRAINT ck_orders_dispute_status,
    DROP CONSTRAINT ck_orders_refunded_amount,
    DROP COLUMN dispute_status,
    DROP COLUMN refunded_amount;
