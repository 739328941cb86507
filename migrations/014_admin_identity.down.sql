-- Single sign-on sessions cannot outlive the columns that describe them.
DELETE FROM admin_session WHERE token_mac IS NULL OR CHAR_LENGTH(actor) > 64;
ALTER TABLE admin_session
    DROP COLUMN display_name,
    DROP COLUMN email,
    DROP COLUMN subject,
    DROP COLUMN role,
    MODIFY token_mac BINARY(32)  NOT NULL,
    MODIFY actor     VARCHAR(64) NOT NULL;
-- Longer actors (e-mail addresses) are cut to fit.
UPDATE admin_audit SET actor = LEFT(actor, 64) WHERE CHAR_LENGTH(actor) > 64;
ALTER TABLE admin_audit DROP KEY ix_admin_audit_target, MODIFY actor VARCHAR(64) NOT NULL;
UPDATE replay_job SET actor = LEFT(actor, 64) WHERE CHAR_LENGTH(actor) > 64;
ALTER TABLE replay_job  MODIFY actor VARCHAR(64) NOT NULL;
