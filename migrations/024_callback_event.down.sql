-- An older callgate dedupes on callback_log's unique key alone: the events
-- whose payload retention deleted are forgotten.
DROP TABLE IF EXISTS callback_event;
