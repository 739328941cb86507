-- An older callgate keeps dead letters forever and counts none dropped.
DROP TABLE IF EXISTS dead_letters_dropped;
