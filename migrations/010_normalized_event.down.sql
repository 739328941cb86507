UPDATE shipments SET order_code = '' WHERE order_code IS NULL;
ALTER TABLE shipments MODIFY order_code VARCHAR(64) NOT NULL;
ALTER TABLE callback_attempt DROP COLUMN note;
ALTER TABLE callback_log DROP COLUMN normalized;
