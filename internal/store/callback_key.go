package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// LockKeyTx locks the (kind, key) row of callback_key until tx ends, so two
// callbacks of one key never run at once, across any number of workers. It
// never waits: busy reports that another transaction holds the key.
func (s *Store) LockKeyTx(ctx context.Context, tx *Tx, kind, key string) (busy bool, err error) {
	var found []string
	err = s.q(ctx, tx).Raw(`SELECT kind FROM callback_key WHERE kind = ? AND business_key = ? FOR UPDATE NOWAIT`, kind, key).Scan(&found).Error
	if err = translate(err); errors.Is(err, ErrLockNotAvailable) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("error locking key %q: %w", key, err)
	}
	now := time.Now().UTC()
	if len(found) == 0 {
		// First callback of this key: create the row (and so hold it).
		err = s.q(ctx, tx).Exec(`INSERT INTO callback_key (kind, business_key, locked_at) VALUES (?, ?, ?)
			ON DUPLICATE KEY UPDATE locked_at = VALUES(locked_at)`, kind, key, now).Error
	} else {
		err = s.q(ctx, tx).Exec(`UPDATE callback_key SET locked_at = ? WHERE kind = ? AND business_key = ?`, now, kind, key).Error
	}
	if err != nil {
		return false, fmt.Errorf("error locking key %q: %w", key, translate(err))
	}
	return false, nil
}

// DeleteKeysBefore deletes up to limit callback_key rows created or last
// locked one by one (LockKeyTx) before cutoff that no transaction holds
// now, and returns how many went. A key row is only a lock anchor: a
// worker that needs a deleted key again creates it again (one INSERT), so
// deleting it loses nothing, and a row a worker holds is skipped, never
// waited for.
func (s *Store) DeleteKeysBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	var n int
	err := s.InTx(ctx, func(tx *Tx) error {
		var keys []Key
		err := s.q(ctx, tx).Raw(`SELECT kind, business_key FROM callback_key WHERE locked_at < ? ORDER BY locked_at LIMIT ? FOR UPDATE SKIP LOCKED`,
			cutoff, limit).Scan(&keys).Error
		if err != nil || len(keys) == 0 {
			return translate(err)
		}
		// One statement per kind naming the primary key's columns: MariaDB
		// reads the whole table for a one-tuple (kind, business_key) IN,
		// and would then wait for the rows workers hold.
		byKind := map[string][]string{}
		var kinds []string
		for _, k := range keys {
			if byKind[k.Kind] == nil {
				kinds = append(kinds, k.Kind)
			}
			byKind[k.Kind] = append(byKind[k.Kind], k.BusinessKey)
		}
		for _, kind := range kinds {
			res := s.q(ctx, tx).Exec(`DELETE FROM callback_key WHERE kind = ? AND business_key IN ?`, kind, byKind[kind])
			if res.Error != nil {
				return translate(res.Error)
			}
			n += int(res.RowsAffected)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("error deleting old key rows: %w", err)
	}
	return n, nil
}
