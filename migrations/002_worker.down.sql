DROP TABLE IF EXISTS outbox;
DROP TABLE IF EXISTS callback_attempt;
