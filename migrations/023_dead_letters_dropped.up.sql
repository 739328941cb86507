-- How many dead letters retention has deleted, per source: notifications
-- whose signature and merchant held but that the source's preset could not
-- read (FAILED, never processable), deleted after
-- scheduler.retention.dead_letter_max_age. The rows are gone; this running
-- count, written in the same transaction as each deletion, is what the
-- console shows of them ("Dead letters dropped by retention"). Finding
-- them needs no new index: retention walks the FAILED rows by
-- ix_callback_log_status_processed, from where its last run stopped.
CREATE TABLE IF NOT EXISTS dead_letters_dropped (
    source          VARCHAR(64) NOT NULL,
    dropped         BIGINT      NOT NULL DEFAULT 0,
    last_dropped_at DATETIME(6) NOT NULL,
    PRIMARY KEY (source)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
