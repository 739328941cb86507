-- Operators sign in with single sign-on (OpenID Connect) as well as with
-- admin tokens, and hold a role. A session says how it was opened (kind
-- 'token' or 'sso'); a single sign-on session remembers who signed in
-- (the ID token's subject, e-mail and name), the role it was given and
-- the ID token itself (the provider's logout wants it as id_token_hint).
-- token_mac binds a token's session to the token, and a single sign-on
-- session to the provider and role mapping it was opened under: changing
-- either ends the sessions. The audit trail and replay jobs name people
-- by e-mail, which can be longer than the 64 characters a token name had.
ALTER TABLE admin_session
    MODIFY actor        VARCHAR(255) NOT NULL,
    ADD COLUMN kind         VARCHAR(8)   NOT NULL DEFAULT 'token',
    ADD COLUMN role         VARCHAR(16)  NOT NULL DEFAULT 'operator',
    ADD COLUMN subject      VARCHAR(255) NULL,
    ADD COLUMN email        VARCHAR(255) NULL,
    ADD COLUMN display_name VARCHAR(255) NULL,
    ADD COLUMN id_token     TEXT         NULL;
-- The callback's page lists who replayed it and why (target = its id).
ALTER TABLE admin_audit
    MODIFY actor VARCHAR(255) NOT NULL,
    ADD KEY ix_admin_audit_target (target, id);
ALTER TABLE replay_job  MODIFY actor VARCHAR(255) NOT NULL;
