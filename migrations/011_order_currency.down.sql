ALTER TABLE orders DROP CONSTRAINT ck_orders_currency, DROP COLUMN currency;
