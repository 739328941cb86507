-- One row the intake writes, with mysql.durability: replica, when a
-- statement met only duplicates: a duplicate adds nothing to the binary
-- log, so no replica acknowledges it, while the acknowledgement of this
-- write (semi-sync, AFTER_SYNC) covers everything committed before it,
-- the duplicates' rows included.
CREATE TABLE IF NOT EXISTS intake_barrier (
  id TINYINT UNSIGNED NOT NULL PRIMARY KEY,
  writes BIGINT UNSIGNED NOT NULL DEFAULT 0
) ENGINE=InnoDB;
INSERT INTO intake_barrier (id, writes) VALUES (1, 0) ON DUPLICATE KEY UPDATE writes = writes;
