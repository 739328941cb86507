-- attempts_base: the attempts count when the callback was last replayed; the
-- retry budget (max_attempts) counts from there, so a replayed callback gets
-- a fresh set of retries while attempt numbers keep growing.
ALTER TABLE callback_log ADD COLUMN IF NOT EXISTS attempts_base INT NOT NULL DEFAULT 0 AFTER attempts;

-- replay_job: a bulk replay, worked through in batches at a bounded rate by
-- the worker that holds the scheduler lease. It resumes after a crash from
-- last_id.
CREATE TABLE IF NOT EXISTS replay_job (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    actor       VARCHAR(64)  NOT NULL,
    reason      TEXT         NOT NULL,
    filter      JSON         NOT NULL,
    -- RUNNING, DONE or CANCELLED.
    status      VARCHAR(16)  NOT NULL,
    matched     INT          NOT NULL,
    replayed    INT          NOT NULL DEFAULT 0,
    -- Only callbacks with id <= max_id (the newest match when the job was
    -- created) are replayed, and they are taken in id order after last_id.
    max_id      BIGINT       NOT NULL,
    last_id     BIGINT       NOT NULL DEFAULT 0,
    created_at  DATETIME(6)  NOT NULL,
    updated_at  DATETIME(6)  NOT NULL,
    finished_at DATETIME(6)  NULL,
    PRIMARY KEY (id),
    KEY ix_replay_job_status (status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- admin_audit: every operator action, who, when, why, on what.
CREATE TABLE IF NOT EXISTS admin_audit (
    id         BIGINT       NOT NULL AUTO_INCREMENT,
    actor      VARCHAR(64)  NOT NULL,
    action     VARCHAR(32)  NOT NULL,
    target     VARCHAR(64)  NOT NULL DEFAULT '',
    reason     TEXT         NULL,
    filter     JSON         NULL,
    count      INT          NOT NULL DEFAULT 0,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY ix_admin_audit_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
