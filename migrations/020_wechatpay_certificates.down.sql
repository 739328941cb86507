-- An older callgate holds the downloaded certificates in memory only: it
-- downloads them again at start (and, signed by a certificate it does not
-- hold, refuses them: docs/platforms/wechatpay.md).
DROP TABLE IF EXISTS wechatpay_certificates;
