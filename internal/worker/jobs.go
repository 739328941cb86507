package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-co-op/gocron/v2"

	"callgate/internal/broker"
	"callgate/internal/ingest"
	"callgate/internal/listen"
	"callgate/internal/metrics"
	"callgate/internal/platform"
	"callgate/internal/reconcile"
	"callgate/internal/replay"
	"callgate/internal/scheduler"
	"callgate/internal/store"
)

// leaseName is the scheduler lease all workers of one database compete for.
const leaseName = "callgate-scheduler"

// startJobs starts the fleet-wide jobs (one instance per tick, chosen by the
// MySQL lease) and the per-instance gauges, and returns their stop func.
func startJobs(ctx context.Context, set Settings, st *store.Store, topo broker.Topology, conn *broker.Connection, ann *broker.Announcer, platforms map[string]platform.Platform, m *metrics.Metrics, workerID string, logger *slog.Logger) (func(), error) {
	sc := set.Scheduler.WithDefaults()
	elector := scheduler.NewElector(st, leaseName, workerID, sc.Lease)
	comp := &scheduler.Compensation{Store: st, Announcer: ann, Threshold: sc.Compensation.Threshold, BatchSize: sc.Compensation.BatchSize,
		Kinds: topo.Kinds, MaxQueued: sc.Compensation.MaxQueued,
		QueueDepth: func(kind string) (int, error) { return topo.QueueDepth(conn, kind) }, Log: logger}
	maxRetry := time.Duration(0)
	sources := make([]string, 0, len(set.Sources))
	for _, s := range set.Sources {
		maxRetry = max(maxRetry, s.Retry.WithDefaults().Max)
		sources = append(sources, s.Name)
	}
	stuck := &scheduler.Stuck{Store: st, Horizon: maxRetry + sc.Compensation.Threshold + time.Minute, BatchSize: sc.Stuck.BatchSize, Log: logger}
	retention := &scheduler.Retention{Store: st, MaxAge: sc.Retention.MaxAge, DeadLetterMaxAge: sc.Retention.DeadLetterMaxAge,
		DedupeMaxAge: sc.Retention.DedupeMaxAge, BatchSize: sc.Retention.BatchSize, Log: logger}
	partitions := &scheduler.Partitions{Store: st, DaysAhead: sc.Partitions.DaysAhead, Log: logger}
	replays := &replay.Runner{Store: st, Announcer: ann, Threshold: sc.Compensation.Threshold,
		Rate: set.Replay.WithDefaults().Rate, Interval: sc.Compensation.Interval, Log: logger,
		OnReplayed: func(n int) { m.Replayed.WithLabelValues("bulk").Add(float64(n)) }}
	m.DownstreamUnroutedLimit.Set(float64(topo.UnroutedLimit()))
	gauges := &scheduler.Gauges{Store: st, Metrics: m, Sources: sources, Leader: elector.Leader,
		UnroutedDepth: func() (int, error) {
			// The first runs come before the broker's first connect (the
			// jobs start at once): skip the queue's gauge quietly until then.
			select {
			case <-conn.Connected():
			default:
				return 0, fmt.Errorf("broker: %w", scheduler.ErrNotYet)
			}
			return topo.UnroutedDepth(conn)
		}}

	recon, err := Reconciliation(ctx, set, st, platforms, ingest.AnnounceNew(ann, logger), m, logger)
	if err != nil {
		return nil, err
	}

	fleet, err := scheduler.New(logger, m, []scheduler.Job{
		{Name: "reconcile", Interval: sc.Reconcile.Interval, Run: func(ctx context.Context) error {
			_, err := recon.RunOnce(ctx)
			return err
		}},
		{Name: "compensation", Interval: sc.Compensation.Interval, Run: func(ctx context.Context) error {
			_, err := comp.RunOnce(ctx)
			return err
		}},
		{Name: "stuck", Interval: sc.Stuck.Interval, Run: func(ctx context.Context) error {
			_, err := stuck.RunOnce(ctx)
			return err
		}},
		{Name: "replays", Interval: sc.Compensation.Interval, Run: replays.RunOnce},
		{Name: "retention", Interval: sc.Retention.Interval, Run: func(ctx context.Context) error {
			_, err := retention.RunOnce(ctx)
			return err
		}},
		// Not at start: the migration made today's partition and days
		// ahead, and a worker's start must not wait on DDL.
		{Name: "partitions", Interval: sc.Partitions.Interval, Deferred: true, Run: func(ctx context.Context) error {
			_, err := partitions.RunOnce(ctx)
			return err
		}},
	}, gocron.WithDistributedElector(elector))
	if err != nil {
		return nil, err
	}
	local, err := scheduler.New(logger, m, []scheduler.Job{
		{Name: "gauges", Interval: sc.Gauges.Interval, Run: gauges.RunOnce},
	})
	if err != nil {
		return nil, err
	}
	fleet.Start()
	local.Start()
	return func() {
		_ = fleet.Stop()
		_ = local.Stop()
		// Always: the last lease check may have failed on the shutdown's
		// cancelled context, and deleting a lease we do not hold is a no-op.
		_ = elector.Release(context.WithoutCancel(ctx))
	}, nil
}

// serveMetrics serves GET /metrics and /healthz for the worker on ln, or
// on a new listener on addr when ln is nil, and returns the address it
// is bound to.
func serveMetrics(addr string, ln net.Listener, m *metrics.Metrics, logger *slog.Logger) (func(), string, error) {
	if ln == nil {
		var err error
		if ln, err = listen.TCP("worker.metrics_addr", MetricsAddrEnv, addr); err != nil {
			return nil, "", err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("worker: metrics server stopped", "error", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, ln.Addr().String(), nil
}

// Reconciliation builds the job that asks the platforms about orders, with
// every source whose platform has a query callgate uses and whose
// credentials are set, and logs one line saying which are asked and why
// the others are not.
func Reconciliation(ctx context.Context, set Settings, st *store.Store, platforms map[string]platform.Platform,
	announce func([]store.Inserted), m *metrics.Metrics, logger *slog.Logger) (*reconcile.Job, error) {
	sc := set.Scheduler.WithDefaults()
	job := &reconcile.Job{Config: sc.Reconcile, Store: st, Sources: map[string]*reconcile.Source{}, Announce: announce,
		ReannounceAfter: sc.Compensation.Threshold, Log: logger,
		Counted:       func(src, outcome string) { m.ReconcileQueries.WithLabelValues(src, outcome).Inc() },
		Found:         func(src, kind string) { m.ReconcileFound.WithLabelValues(src, kind).Inc() },
		GaveUp:        func(src string) { m.ReconcileGaveUp.WithLabelValues(src).Inc() },
		CircuitOpened: func(src string) { m.ReconcileCircuitOpened.WithLabelValues(src).Inc() }}
	var asked, notAsked []string
	for _, s := range set.Sources {
		src, why, err := reconcile.ForSource(ctx, s, platforms[s.Name], sc.Reconcile)
		if err != nil {
			return nil, fmt.Errorf("source %s: reconciliation: %w", s.Name, err)
		}
		if src == nil {
			notAsked = append(notAsked, s.Name+": "+why)
			continue
		}
		job.Sources[s.Name] = src
		asked = append(asked, s.Name)
	}
	logger.Info("worker: reconciliation", "asks", strings.Join(asked, ", "), "does_not_ask", strings.Join(notAsked, "; "),
		"after", sc.Reconcile.After.String(), "give_up", sc.Reconcile.GiveUp.String())
	job.LogStalled(ctx)
	return job, nil
}
