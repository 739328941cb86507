-- admin_session: the operator page's login sessions. The browser holds a
-- random session id; only its SHA-256 is stored, so reading this table does
-- not let anyone log in. A row ends at logout (deleted) or at expires_at
-- (refused, then purged in bounded batches at each login).
CREATE TABLE IF NOT EXISTS admin_session (
    id_hash    BINARY(32)   NOT NULL,
    actor      VARCHAR(64)  NOT NULL,
    -- HMAC-SHA256 keyed by the session id over the digest of the admin
    -- token that logged in: the session ends when that token is rotated or
    -- removed, and without the id it says nothing about the token.
    token_mac  BINARY(32)   NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id_hash),
    KEY ix_admin_session_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
