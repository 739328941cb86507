DROP TABLE IF EXISTS callback_key;
DROP TABLE IF EXISTS outbox;
DROP TABLE IF EXISTS callback_attempt;
