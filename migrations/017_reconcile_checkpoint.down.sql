-- An older callgate lists no events: the checkpoints go (the next listing
-- of a newer one starts give_up back again, which stores nothing twice).
DROP TABLE IF EXISTS reconcile_checkpoints;
