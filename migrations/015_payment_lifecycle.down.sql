-- An older callgate pays any order that is not PAID again: refunded orders
-- become PAID (a re-sent success is then "already applied", not shipped
-- twice) and closed ones FAILED (an order without a payment), the
-- statuses it knows (docs/upgrading.md, "Upgrading to a payment's whole life").
ALTER TABLE callback_log DROP COLUMN awaiting;
DROP TABLE IF EXISTS disputes;
DROP TABLE IF EXISTS refunds;
DROP TABLE IF EXISTS payments;
UPDATE orders SET payment_status = 'PAID' WHERE payment_status IN ('PARTIALLY_REFUNDED', 'REFUNDED');
UPDATE orders SET payment_status = 'FAILED' WHERE payment_status = 'CLOSED';
ALTER TABLE orders
    MODIFY payment_status VARCHAR(16) NOT NULL DEFAULT 'UNPAID',
    DROP CONSTRAINT ck_orders_dispute_status,
    DROP CONSTRAINT ck_orders_refunded_amount,
    DROP COLUMN dispute_status,
    DROP COLUMN refunded_amount;
