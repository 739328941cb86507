package scheduler

import (
	"callgate/internal/store"
	"context"
	"errors"
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
	st     *store.Store
	name   string
	owner  string
	lease  time.Duration
	leader atomic.Bool
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an elector for the lease name, identifying this
// instance as owner.
func NewElector(st *store.Store, name, owner string, lease time.Duration) *Elector {
	return &Elector{st: st, name: name, owner: owner, lease: lease}
}

// IsLeader implements gocron.Elector.
func (e *Elector) IsLeader(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	owner, err := e.st.AcquireLease(ctx, e.name, e.owner, e.lease)
	if err != nil {
		e.leader.Store(false)
		return err
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
	return e.st.ReleaseLease(ctx, e.name, e.owner)
}
