-- An older callgate neither asks nor knows where a callback came from:
-- the rows a query answer stored stay, as if a platform had sent them.
DROP TABLE IF EXISTS reconcile_orders;
ALTER TABLE callback_log DROP COLUMN origin;
ALTER TABLE orders
    DROP KEY ix_orders_reconcile,
    DROP COLUMN created_at,
    DROP COLUMN payment_source;
