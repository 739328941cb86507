package scheduler

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"callgate/internal/metrics"
)

// Gauges refreshes the backlog gauges: PENDING count and oldest age per
// source, FAILED count per source, PENDING outbox rows, the relay lag and
// the notifications parked in the unrouted queue.
// It runs on every instance (not only the leader) so no instance exports
// stale values.
type Gauges struct {
	DB      *gorm.DB
	Metrics *metrics.Metrics
	// Sources are the configured sources, one series each.
	Sources []string
	// Leader reports whether this instance holds the scheduler lease.
	Leader func() bool
	// UnroutedDepth reports the messages in <prefix>.downstream.unrouted;
	// nil leaves that gauge alone. While it fails (broker away) the gauge
	// keeps its last value and the run reports the error.
	UnroutedDepth func() (int, error)
}

// RunOnce reads the figures and sets the gauges.
func (g *Gauges) RunOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now := time.Now().UTC()
	db := g.DB.WithContext(ctx)

	// Per source, on the (source, status, id) index: counting reads index
	// entries only, and the oldest PENDING is the lowest id.
	type backlog struct {
		N      int64
		Oldest *time.Time
		Failed int64
	}
	figures := make(map[string]backlog, len(g.Sources))
	for _, src := range g.Sources {
		var b backlog
		var first struct {
			N     int64
			MinID *int64
		}
		if err := db.Raw(`SELECT COUNT(*) AS n, MIN(id) AS min_id FROM callback_log WHERE source = ? AND status = 'PENDING'`, src).Scan(&first).Error; err != nil {
			return fmt.Errorf("error reading backlog: %w", err)
		}
		b.N = first.N
		if first.MinID != nil {
			var oldest struct{ ReceivedAt *time.Time }
			if err := db.Raw(`SELECT received_at FROM callback_log WHERE id = ?`, *first.MinID).Scan(&oldest).Error; err != nil {
				return fmt.Errorf("error reading backlog age: %w", err)
			}
			b.Oldest = oldest.ReceivedAt
		}
		if err := db.Raw(`SELECT COUNT(*) FROM callback_log WHERE source = ? AND status = 'FAILED'`, src).Scan(&b.Failed).Error; err != nil {
			return fmt.Errorf("error reading failed count: %w", err)
		}
		figures[src] = b
	}
	var ob struct {
		N      int64
		Oldest *time.Time
	}
	if err := db.Raw(`SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox WHERE status = 'PENDING'`).Scan(&ob).Error; err != nil {
		return fmt.Errorf("error reading outbox backlog: %w", err)
	}

	for src, b := range figures {
		g.Metrics.BacklogPending.WithLabelValues(src).Set(float64(b.N))
		age := 0.0
		if b.Oldest != nil {
			age = max(0, now.Sub(*b.Oldest).Seconds())
		}
		g.Metrics.BacklogOldestAge.WithLabelValues(src).Set(age)
		g.Metrics.FailedCallbacks.WithLabelValues(src).Set(float64(b.Failed))
	}
	g.Metrics.OutboxPending.Set(float64(ob.N))
	lag := 0.0
	if ob.Oldest != nil {
		lag = max(0, now.Sub(*ob.Oldest).Seconds())
	}
	g.Metrics.RelayLag.Set(lag)
	if g.Leader != nil {
		v := 0.0
		if g.Leader() {
			v = 1
		}
		g.Metrics.SchedulerLeader.Set(v)
	}
	if g.UnroutedDepth != nil {
		n, err := g.UnroutedDepth()
		if err != nil {
			return fmt.Errorf("error reading unrouted notifications: %w", err)
		}
		g.Metrics.DownstreamUnrouted.Set(float64(n))
	}
	return nil
}
