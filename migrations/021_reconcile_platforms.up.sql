-- Where each reconciled platform stands, shared by the fleet (the leader
-- writes it, the console and a new leader read it): paused because the
-- platform said 429 or 503 (until Retry-After, capped), its circuit open
-- after a run of timeouts, and how far the walk through orders older than
-- the query window has gone (docs/reconciliation.md, "A slow, refusing or
-- hung platform").
CREATE TABLE IF NOT EXISTS reconcile_platforms (
    source             VARCHAR(64)  NOT NULL,
    paused_until       DATETIME(6)  NULL,
    pause_reason       VARCHAR(255) NULL,
    circuit_open_until DATETIME(6)  NULL,
    -- Consecutive queries that reached no answer (timeouts, connections).
    failures           INT          NOT NULL DEFAULT 0,
    circuit_opened     INT          NOT NULL DEFAULT 0,
    last_error         VARCHAR(255) NULL,
    -- The last order (created_at, order_code) the walk through orders
    -- older than the window has passed (NULL: from the oldest).
    late_created_at    DATETIME(6)  NULL,
    late_order_code    VARCHAR(64)  NULL,
    updated_at         DATETIME(6)  NOT NULL,
    PRIMARY KEY (source)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
