-- Every order has a currency (ISO 4217, upper case), and its amount is in
-- that currency's minor units: a payment pays an order only in its
-- currency. Existing rows, and rows inserted without a currency, get CNY,
-- the column's default; a shop selling in another currency sets the
-- default and its rows (docs/upgrading.md, "Upgrading to money-safe payments").
-- Order codes grow to the business key's 191 characters: a Shopify order
-- is "<shop>.myshopify.com/<name>".
ALTER TABLE orders
    MODIFY order_code VARCHAR(191) NOT NULL,
    ADD COLUMN currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'CNY' AFTER amount,
    ADD CONSTRAINT ck_orders_currency CHECK (currency REGEXP '^[A-Z]{3}$');
-- A shipment's order code is as long as an order's.
ALTER TABLE shipments MODIFY order_code VARCHAR(191) NULL;
