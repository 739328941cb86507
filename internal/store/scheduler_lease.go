package store

import (
	"context"
	"fmt"
	"time"
)

// acquireLeaseSQL takes the lease if it is free, expired or already ours,
// and renews it if ours. The assignments run left to right: owner is
// decided first, then expires_at moves only if the owner is now us. Times
// are the database's clock, so instances with skewed clocks agree.
const acquireLeaseSQL = `INSERT INTO scheduler_lease (name, owner, expires_at)
 VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)
 ON DUPLICATE KEY UPDATE
   owner = IF(owner = VALUES(owner) OR expires_at < NOW(6), VALUES(owner), owner),
   expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)`

// AcquireLease takes or renews lease name for owner, for lease from now,
// unless another owner holds it unexpired, and returns who holds it now.
func (s *Store) AcquireLease(ctx context.Context, name, owner string, lease time.Duration) (string, error) {
	if _, err := s.sql.ExecContext(ctx, acquireLeaseSQL, name, owner, lease.Microseconds()); err != nil {
		return "", fmt.Errorf("error renewing lease %s: %w", name, translate(err))
	}
	var holder string
	if err := s.sql.QueryRowContext(ctx, `SELECT owner FROM scheduler_lease WHERE name = ?`, name).Scan(&holder); err != nil {
		return "", fmt.Errorf("error reading lease %s: %w", name, translate(err))
	}
	return holder, nil
}

// ReleaseLease gives lease name up if owner holds it (a graceful stop);
// releasing a lease held by another is a no-op.
func (s *Store) ReleaseLease(ctx context.Context, name, owner string) error {
	if _, err := s.sql.ExecContext(ctx, `DELETE FROM scheduler_lease WHERE name = ? AND owner = ?`, name, owner); err != nil {
		return fmt.Errorf("error releasing lease %s: %w", name, translate(err))
	}
	return nil
}
