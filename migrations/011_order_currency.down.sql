ALTER TABLE shipments MODIFY order_code VARCHAR(64) NULL;
ALTER TABLE orders DROP CONSTRAINT ck_orders_currency, DROP COLUMN currency, MODIFY order_code VARCHAR(64) NOT NULL;
