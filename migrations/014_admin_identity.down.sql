-- Only sessions the older code can hold survive: a token's, with a name
-- that fits. (An older binary reads a "name:secret:viewer" token as an
-- operator whose secret ends in ":viewer": remove viewer tokens from
-- CALLGATE_ADMIN_TOKEN before rolling back.)
DELETE FROM admin_session WHERE kind <> 'token' OR role <> 'operator' OR CHAR_LENGTH(actor) > 64;
ALTER TABLE admin_session
    DROP COLUMN id_token,
    DROP COLUMN display_name,
    DROP COLUMN email,
    DROP COLUMN subject,
    DROP COLUMN role,
    DROP COLUMN kind,
    MODIFY actor VARCHAR(64) NOT NULL;
-- Longer actors (e-mail addresses) are cut to fit.
UPDATE admin_audit SET actor = LEFT(actor, 64) WHERE CHAR_LENGTH(actor) > 64;
ALTER TABLE admin_audit DROP KEY ix_admin_audit_target, MODIFY actor VARCHAR(64) NOT NULL;
UPDATE replay_job SET actor = LEFT(actor, 64) WHERE CHAR_LENGTH(actor) > 64;
ALTER TABLE replay_job  MODIFY actor VARCHAR(64) NOT NULL;
