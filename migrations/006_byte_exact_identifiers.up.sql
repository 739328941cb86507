-- Event ids and business keys are identifiers: two that differ by one byte
-- are different, trailing spaces included. utf8mb4_bin is a PAD SPACE
-- collation in MariaDB (and MySQL 5.7), so 'evt-1' and 'evt-1 ' were equal
-- to the unique key (a distinct callback answered as a duplicate) and to
-- the per-key order and lock. VARBINARY compares byte by byte in MariaDB
-- and MySQL alike. The intake already limits both to 191 bytes.
--
-- On a large callback_log this rebuilds the table (ALGORITHM=COPY), which
-- blocks writes while it runs: apply it in a quiet window.
ALTER TABLE callback_log
    MODIFY event_id     VARBINARY(191) NOT NULL,
    MODIFY business_key VARBINARY(191) NOT NULL;

ALTER TABLE callback_key
    MODIFY business_key VARBINARY(191) NOT NULL;
