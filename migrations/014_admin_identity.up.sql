-- Operators sign in with single sign-on (OpenID Connect) as well as with
-- admin tokens, and hold a role. A session remembers who signed in
-- (subject, e-mail, name from the ID token) and the role it was given;
-- a token's session has no identity columns and takes its role from the
-- token as configured now. The audit trail and replay jobs name people by
-- e-mail, which can be longer than the 64 characters a token name had.
ALTER TABLE admin_session
    MODIFY actor        VARCHAR(255) NOT NULL,
    -- NULL for a single sign-on session: no token opened it.
    MODIFY token_mac    BINARY(32)   NULL,
    ADD COLUMN role         VARCHAR(16)  NOT NULL DEFAULT 'operator',
    ADD COLUMN subject      VARCHAR(255) NULL,
    ADD COLUMN email        VARCHAR(255) NULL,
    ADD COLUMN display_name VARCHAR(255) NULL;
-- The callback's page lists who replayed it and why (target = its id).
ALTER TABLE admin_audit
    MODIFY actor VARCHAR(255) NOT NULL,
    ADD KEY ix_admin_audit_target (target, id);
ALTER TABLE replay_job  MODIFY actor VARCHAR(255) NOT NULL;
