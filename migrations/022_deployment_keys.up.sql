-- Random keys of the deployment, one row per use, made once by whichever
-- process asks first (INSERT IGNORE, then everyone reads the row that won)
-- and shared by the fleet: sso_flow MACs single sign-on's flow cookie
-- (internal/admin/sso_flow.go), so that any gateway finishes a sign-in
-- another started, and the key depends on no configured secret that a
-- collected cookie would let anyone test guesses of offline. Deleting a
-- row makes a new key at the next start of every process (sign-ins in
-- flight are refused once). key_bytes are raw bytes, never shown.
CREATE TABLE IF NOT EXISTS deployment_keys (
    name       VARCHAR(64)   NOT NULL,
    key_bytes  VARBINARY(64) NOT NULL,
    created_at DATETIME(6)   NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
