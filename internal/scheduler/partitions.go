package scheduler

import (
	"context"
	"log/slog"
	"time"

	"callgate/internal/store"
)

// PartitionsLockWait is how long the partitions job's DDL waits for the
// metadata lock of a table (lock_wait_timeout of its own connection):
// statements on the table queue behind a waiting ALTER, so it gives up
// after this and tries again at its next run rather than hold the intake
// up behind a long transaction.
const PartitionsLockWait = 3 * time.Second

// Partitions creates the day partitions of callback_log, callback_attempt
// and outbox ahead of time (migration 025): one per UTC day from today
// through today + DaysAhead (store.EnsureDayPartitions). It runs at the
// worker's start and every scheduler.partitions.interval under the
// fleet's lease; a second run at once, on another worker, waits for the
// first and finds nothing left to do.
type Partitions struct {
	Store     *store.Store
	DaysAhead int
	Log       *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// RunOnce creates what is missing and returns how many partitions it
// created.
func (p *Partitions) RunOnce(ctx context.Context) (int, error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	n, err := p.Store.EnsureDayPartitions(ctx, now().UTC(), p.DaysAhead, PartitionsLockWait)
	if n > 0 && p.Log != nil {
		p.Log.Info("scheduler: day partitions created", "partitions", n, "days_ahead", p.DaysAhead)
	}
	return n, err
}
