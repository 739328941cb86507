DROP TABLE IF EXISTS admin_session;
