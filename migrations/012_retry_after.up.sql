-- The earliest a retrying callback's next attempt may start: set when an
-- attempt fails and is to be retried, cleared by a replay. next_attempt_at
-- stays when the compensation job announces it again (it moves with each
-- announcement); a callback is never run before retry_after, whatever
-- delivers its id (a message redelivered with its mates, a key's wake-up).
ALTER TABLE callback_log ADD COLUMN retry_after DATETIME(6) NULL AFTER next_attempt_at;
