-- scheduler_lease: which worker process runs the scheduled jobs. One row per
-- lease name; the holder renews expires_at, and when it dies the lease
-- expires and another process takes it. Times are the database's clock, so
-- instances with skewed clocks agree.
CREATE TABLE IF NOT EXISTS scheduler_lease (
    name       VARCHAR(64)  NOT NULL,
    owner      VARCHAR(128) NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
