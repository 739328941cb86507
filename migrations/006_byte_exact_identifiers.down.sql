-- Back to PAD SPACE text columns. Fails on the unique key if two event ids
-- of one source differ only by trailing spaces.
ALTER TABLE callback_key
    MODIFY business_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;

ALTER TABLE callback_log
    MODIFY event_id     VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    MODIFY business_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
