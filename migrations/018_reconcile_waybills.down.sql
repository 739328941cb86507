-- An older callgate does not ask about waybills: what the answers stored
-- stays, as if Kuaidi100 had pushed it.
DROP TABLE IF EXISTS reconcile_waybills;
ALTER TABLE shipments
    DROP KEY ix_shipments_silent,
    DROP COLUMN carrier_phone,
    DROP COLUMN carrier_code,
    DROP COLUMN tracking_source;
