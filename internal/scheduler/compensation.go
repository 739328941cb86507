package scheduler

import (
	"context"
	"log/slog"
	"time"

	"callgate/internal/broker"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Announcer queues a log id for the workers without blocking.
type Announcer interface {
	Announce(an broker.Announcement) bool
}

// Compensation announces PENDING callbacks that are due by next_attempt_at:
// retries whose backoff has passed (the retry mechanism), and callbacks
// whose announcement was lost or never sent (the gateway sets
// next_attempt_at = received_at + threshold). Claiming pushes
// next_attempt_at a threshold ahead, so a callback is announced again only
// if it is still not processed then.
//
// Why a due-time scan rather than RabbitMQ TTL retry queues: the row in
// MySQL is already the source of truth, a scan also catches announcements
// the broker never got, per-message TTLs only expire at the head of a queue
// (a 10-minute delay would hold a 5-second one behind it), and operators can
// see and change next_attempt_at. The cost is one indexed range scan per
// interval.
//
// Under a backlog the queue itself holds announcements older than the
// threshold; announcing those callbacks again would only pile duplicates
// on the workers. So a kind whose queue holds more than MaxQueued ready
// messages is skipped for that run: its workers are busy anyway, and
// whatever is due is announced once the queue has come down.
type Compensation struct {
	Store     *store.Store
	Announcer Announcer
	Threshold time.Duration
	BatchSize int
	// Kinds are scanned one by one (each has its own queue).
	Kinds []string
	// QueueDepth reports the ready messages of a kind's queue; nil skips
	// the backlog check.
	QueueDepth func(kind string) (int, error)
	// MaxQueued is the backlog above which a kind is skipped. Default 1000.
	MaxQueued int
	Log       *slog.Logger
}

// RunOnce announces every due callback, batch by batch, oldest due first,
// and returns how many it announced.
func (c *Compensation) RunOnce(ctx context.Context) (int, error) {
	total := 0
	maxQueued := c.MaxQueued
	if maxQueued <= 0 {
		maxQueued = CompensationMaxQueuedDefault
	}
	for _, kind := range c.Kinds {
		if c.QueueDepth != nil {
			if depth, err := c.QueueDepth(kind); err == nil && depth > maxQueued {
				c.Log.Debug("compensation: queue backlog, not adding to it", "kind", kind, "ready", depth)
				continue
			}
		}
		for ctx.Err() == nil {
			n, full, err := c.batch(ctx, kind)
			total += n
			if err != nil {
				return total, err
			}
			if n < c.BatchSize || full {
				break
			}
		}
	}
	if total > 0 {
		c.Log.Info("compensation: announced due callbacks", "count", total)
	}
	return total, nil
}

func (c *Compensation) batch(ctx context.Context, kind string) (announced int, bufferFull bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	due, err := c.Store.ClaimDue(ctx, kind, now, now.Add(c.Threshold), c.BatchSize)
	if err != nil {
		return 0, false, err
	}
	ans := broker.Announcements(len(due), func(int) string { return kind }, func(i int) int64 { return due[i].ID },
		func(i int) string { return tracing.TraceParentFromID(due[i].TraceID) })
	for _, an := range ans {
		if !c.Announcer.Announce(an) {
			// The rest stays due a threshold from now; stop claiming more.
			bufferFull = true
			break
		}
		announced += len(an.LogIDs)
	}
	return announced, bufferFull, nil
}
