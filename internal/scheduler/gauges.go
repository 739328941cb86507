package scheduler

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"callgate/internal/metrics"
)

// Gauges refreshes the backlog gauges: PENDING count and oldest age per
// source, FAILED count per source, PENDING outbox rows and the relay lag.
// It runs on every instance (not only the leader) so no instance exports
// stale values.
type Gauges struct {
	DB      *gorm.DB
	Metrics *metrics.Metrics
	// Sources are reset to 0 when absent from a scan.
	Sources []string
	// Leader reports whether this instance holds the scheduler lease.
	Leader func() bool
}

// RunOnce reads the figures and sets the gauges.
func (g *Gauges) RunOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now := time.Now().UTC()
	db := g.DB.WithContext(ctx)

	var pending []struct {
		Source string
		N      int64
		Oldest *time.Time
	}
	if err := db.Raw(`SELECT source, COUNT(*) AS n, MIN(received_at) AS oldest FROM callback_log WHERE status = 'PENDING' GROUP BY source`).Scan(&pending).Error; err != nil {
		return fmt.Errorf("error reading backlog: %w", err)
	}
	var failed []struct {
		Source string
		N      int64
	}
	if err := db.Raw(`SELECT source, COUNT(*) AS n FROM callback_log WHERE status = 'FAILED' GROUP BY source`).Scan(&failed).Error; err != nil {
		return fmt.Errorf("error reading failed count: %w", err)
	}
	var ob struct {
		N      int64
		Oldest *time.Time
	}
	if err := db.Raw(`SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox WHERE status = 'PENDING'`).Scan(&ob).Error; err != nil {
		return fmt.Errorf("error reading outbox backlog: %w", err)
	}

	for _, s := range g.Sources {
		g.Metrics.BacklogPending.WithLabelValues(s).Set(0)
		g.Metrics.BacklogOldestAge.WithLabelValues(s).Set(0)
		g.Metrics.FailedCallbacks.WithLabelValues(s).Set(0)
	}
	for _, p := range pending {
		g.Metrics.BacklogPending.WithLabelValues(p.Source).Set(float64(p.N))
		if p.Oldest != nil {
			g.Metrics.BacklogOldestAge.WithLabelValues(p.Source).Set(now.Sub(*p.Oldest).Seconds())
		}
	}
	for _, f := range failed {
		g.Metrics.FailedCallbacks.WithLabelValues(f.Source).Set(float64(f.N))
	}
	g.Metrics.OutboxPending.Set(float64(ob.N))
	lag := 0.0
	if ob.Oldest != nil {
		lag = now.Sub(*ob.Oldest).Seconds()
	}
	g.Metrics.RelayLag.Set(lag)
	if g.Leader != nil {
		v := 0.0
		if g.Leader() {
			v = 1
		}
		g.Metrics.SchedulerLeader.Set(v)
	}
	return nil
}
