-- A platform preset (alipay, wechatpay-v3, adyen, ...) maps what the
-- platform sent to callgate's canonical event; it is stored beside the raw
-- payload, which stays byte for byte what was signed. NULL for sources
-- without a preset, whose payload is read as it is.
ALTER TABLE callback_log ADD COLUMN normalized BLOB NULL;
-- Why an attempt that succeeded changed nothing (a notification that is
-- neither a payment nor a failure, e.g. Alipay WAIT_BUYER_PAY).
ALTER TABLE callback_attempt ADD COLUMN note VARCHAR(500) NULL;
-- A carrier that does not know the merchant's order (Kuaidi100) still
-- records the shipment; the order code is filled when an event brings it.
ALTER TABLE shipments MODIFY order_code VARCHAR(64) NULL;
