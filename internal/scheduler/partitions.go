package scheduler

import (
	"context"
	"log/slog"
	"time"

	"callgate/internal/store"
)

// PartitionsLockWait is how long the partition DDL (the partitions job's
// splits, retention's drops) waits for the metadata lock of a table
// (lock_wait_timeout of its own connection): every statement on the
// table queues behind a waiting ALTER, so it gives up after this, well
// within the intake's timeout, and tries again at its next run rather
// than hold the intake up behind a long transaction.
const PartitionsLockWait = time.Second

// Partitions creates the day partitions of callback_log, callback_attempt
// and outbox ahead of time (migration 025 made today's and 7 days ahead):
// one per UTC day from today through today + DaysAhead
// (store.EnsureDayPartitions). It runs every scheduler.partitions.interval
// under the fleet's lease, first one interval after a worker starts (not
// at the start: nothing can be due then that the migration or the last
// run did not make, and a worker's start must not wait on DDL); a second
// run at once, on another worker, waits for the first and finds nothing
// left to do.
//
// While it keeps up it splits an empty p_future, a change of metadata. If
// p_future holds rows (the workers were down longer than DaysAhead), it
// splits it all the same, so that those rows get their day and retention
// drops them with it, and warns: the split copies them, holding writes to
// the table meanwhile (docs/operations/README.md, "Retention and dead
// letters").
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
	n, err := p.Store.EnsureDayPartitions(ctx, now().UTC(), p.DaysAhead, PartitionsLockWait, func(table string, rows int64) {
		p.Log.Warn("scheduler: p_future holds rows of days without their partition; splitting it copies them and holds writes to the table until done",
			"table", table, "rows", rows, "days_ahead", p.DaysAhead)
	})
	if n > 0 {
		p.Log.Info("scheduler: day partitions created", "partitions", n, "days_ahead", p.DaysAhead)
	}
	return n, err
}
