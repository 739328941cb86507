-- Every order has a currency (ISO 4217, upper case), and its amount is in
-- that currency's minor units: a payment pays an order only in its
-- currency. Existing rows, and rows inserted without a currency, get CNY,
-- the column's default; a shop selling in another currency sets the
-- default and its rows before the upgrade (README, "Upgrading").
ALTER TABLE orders
    ADD COLUMN currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'CNY' AFTER amount,
    ADD CONSTRAINT ck_orders_currency CHECK (currency REGEXP '^[A-Z]{3}$');
