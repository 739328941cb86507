package scheduler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
)

// ErrNotLeader is returned by IsLeader on every instance but the holder.
var ErrNotLeader = errors.New("not the scheduler leader")

// Elector is gocron's distributed elector on a MySQL lease row
// (scheduler_lease): the instance holding an unexpired lease runs the jobs,
// the others skip their ticks. The holder renews the lease at every check;
// if it dies, the lease expires after Lease and the next instance to check
// takes it. A graceful stop releases it at once.
//
// A lease row is sturdier than GET_LOCK, which vanishes silently with its
// session and does not survive session-sharing proxies. The jobs stay
// harmless when run twice (they claim rows with SKIP LOCKED): the lease
// saves work, correctness does not depend on it.
type Elector struct {
	db     *sql.DB
	name   string
	owner  string
	lease  time.Duration
	leader atomic.Bool
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an elector for the lease name, identifying this
// instance as owner.
func NewElector(db *sql.DB, name, owner string, lease time.Duration) *Elector {
	return &Elector{db: db, name: name, owner: owner, lease: lease}
}

// acquireSQL takes the lease if it is free, expired or already ours, and
// renews it if ours. The assignments run left to right: owner is decided
// first, then expires_at moves only if the owner is now us.
const acquireSQL = `INSERT INTO scheduler_lease (name, owner, expires_at)
 VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)
 ON DUPLICATE KEY UPDATE
   owner = IF(owner = VALUES(owner) OR expires_at < NOW(6), VALUES(owner), owner),
   expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)`

// IsLeader implements gocron.Elector.
func (e *Elector) IsLeader(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := e.db.ExecContext(ctx, acquireSQL, e.name, e.owner, e.lease.Microseconds()); err != nil {
		e.leader.Store(false)
		return fmt.Errorf("error renewing scheduler lease: %w", err)
	}
	var owner string
	if err := e.db.QueryRowContext(ctx, `SELECT owner FROM scheduler_lease WHERE name = ?`, e.name).Scan(&owner); err != nil {
		e.leader.Store(false)
		return fmt.Errorf("error reading scheduler lease: %w", err)
	}
	if owner != e.owner {
		e.leader.Store(false)
		return ErrNotLeader
	}
	e.leader.Store(true)
	return nil
}

// Leader reports what the last check found.
func (e *Elector) Leader() bool { return e.leader.Load() }

// Release gives the lease up (graceful stop), so another instance takes it
// at its next tick instead of after the lease expires.
func (e *Elector) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e.leader.Store(false)
	_, err := e.db.ExecContext(ctx, `DELETE FROM scheduler_lease WHERE name = ? AND owner = ?`, e.name, e.owner)
	if err != nil {
		return fmt.Errorf("error releasing scheduler lease: %w", err)
	}
	return nil
}
