-- WeChat Pay platform certificates downloaded from /v3/certificates
-- (internal/wechatcerts, docs/platforms/wechatpay.md): one row per
-- merchant and certificate serial, as the last download believed listed
-- it. Every gateway and worker loads the merchant's rows not expired at
-- start, beside the configured certificates, and a download believed
-- replaces them: a process started after WeChat Pay switched certificates
-- verifies with the new one at once, and holds it while WeChat Pay cannot
-- be reached. mchid and serial_no are identifiers, compared byte by byte
-- (VARBINARY: utf8mb4_bin pads spaces); the serial is upper-case hex, as
-- Wechatpay-Serial names it. Times are UTC.
CREATE TABLE IF NOT EXISTS wechatpay_certificates (
    mchid         VARBINARY(32) NOT NULL,
    serial_no     VARBINARY(64) NOT NULL,
    pem           TEXT          NOT NULL,
    effective_at  DATETIME(6)   NOT NULL,
    expires_at    DATETIME(6)   NOT NULL,
    downloaded_at DATETIME(6)   NOT NULL,
    PRIMARY KEY (mchid, serial_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
