package scheduler

import (
	"context"
	"fmt"
	"time"

	"callgate/internal/metrics"
	"callgate/internal/store"
)

// Gauges refreshes the backlog gauges: PENDING count and oldest age per
// source, FAILED count per source, PENDING outbox rows, the relay lag,
// the notifications parked in the unrouted queue, and whether each
// reconciled platform is paused or its circuit open.
// It runs on every instance (not only the leader) so no instance exports
// stale values.
type Gauges struct {
	Store   *store.Store
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
	figures := make(map[string]store.SourceBacklog, len(g.Sources))
	for _, src := range g.Sources {
		b, err := g.Store.SourceBacklog(ctx, src)
		if err != nil {
			return err
		}
		figures[src] = b
	}
	ob, err := g.Store.OutboxBacklog(ctx)
	if err != nil {
		return err
	}

	for src, b := range figures {
		g.Metrics.BacklogPending.WithLabelValues(src).Set(float64(b.Pending))
		age := 0.0
		if b.OldestPending != nil {
			age = max(0, now.Sub(*b.OldestPending).Seconds())
		}
		g.Metrics.BacklogOldestAge.WithLabelValues(src).Set(age)
		g.Metrics.FailedCallbacks.WithLabelValues(src).Set(float64(b.Failed))
	}
	g.Metrics.OutboxPending.Set(float64(ob.Pending))
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
	// Where each reconciled platform stands, from the fleet's row (the
	// lease holder writes it): every instance exports the same, so one
	// that lost the lease while a platform was paused does not keep
	// saying so.
	platforms, err := g.Store.ReconcilePlatforms(ctx)
	if err != nil {
		return err
	}
	for _, p := range platforms {
		paused := p.PausedUntil != nil && now.Before(*p.PausedUntil)
		open := p.CircuitOpenUntil != nil && now.Before(*p.CircuitOpenUntil)
		g.Metrics.ReconcilePaused.WithLabelValues(p.Source).Set(b2f(paused))
		g.Metrics.ReconcileCircuitOpen.WithLabelValues(p.Source).Set(b2f(open))
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

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
