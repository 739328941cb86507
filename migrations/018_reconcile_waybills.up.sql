-- Asking Kuaidi100 about silent waybills (docs/reconciliation.md).
-- shipments.tracking_source names the source whose platform tracks the
-- waybill (set by whoever creates the shipment, with the carrier's code
-- as Kuaidi100 names it, e.g. yuantong, and the phone number some
-- carriers ask for; NULL: never asked).
ALTER TABLE shipments
    ADD COLUMN tracking_source VARCHAR(64) NULL,
    ADD COLUMN carrier_code    VARCHAR(32) NULL,
    ADD COLUMN carrier_phone   VARCHAR(32) NULL,
    ADD KEY ix_shipments_silent (tracking_source, updated_at, status);

-- One row per waybill asked about: when it is asked next, how often it
-- was, what the last answer was, and when callgate gave up on it (silent
-- for silent_for + give_up: a parcel on-call should look at; asked again
-- only once a new checkpoint comes).
CREATE TABLE IF NOT EXISTS reconcile_waybills (
    waybill_no   VARCHAR(64)  NOT NULL,
    source       VARCHAR(64)  NOT NULL,
    queries      INT          NOT NULL DEFAULT 0,
    next_at      DATETIME(6)  NOT NULL,
    last_outcome VARCHAR(32)  NOT NULL,
    last_error   VARCHAR(255) NULL,
    found_log_id BIGINT       NULL,
    gave_up_at   DATETIME(6)  NULL,
    updated_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (waybill_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
