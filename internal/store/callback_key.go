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
