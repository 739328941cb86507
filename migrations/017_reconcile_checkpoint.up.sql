-- Reconciliation through a platform's events list (Stripe: GET /v1/events,
-- docs/reconciliation.md): one row per source, listed_until the `created`
-- time up to which every event the list gave was stored. It moves only
-- when a whole listing was stored; no row: the first listing starts
-- scheduler.reconcile.give_up back.
CREATE TABLE IF NOT EXISTS reconcile_checkpoints (
    source       VARCHAR(64) NOT NULL,
    listed_until DATETIME(6) NOT NULL,
    updated_at   DATETIME(6) NOT NULL,
    PRIMARY KEY (source)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
