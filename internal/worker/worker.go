// Package worker is the processing side of callgate: it consumes the log
// ids the gateway announced, one consumer per kind, runs each callback's
// handler in its own transaction with idempotency and per-key ordering,
// records every attempt, publishes the outbox after commit, and runs the
// relay and the compensation job that make nothing get lost.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/downstream"
	"callgate/internal/listen"
	"callgate/internal/metrics"
	"callgate/internal/outbox"
	"callgate/internal/platform"
	"callgate/internal/profiling"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/tracing"
	"callgate/internal/wechatcerts"
)

// Options are what tests may change beyond the config.
type Options struct {
	// Registry replaces the kinds' handlers (tests use their own).
	Registry *callback.Registry
	// Hooks are test seams in the processor.
	Hooks Hooks
	// Metrics lets a test read the series; default: a fresh set.
	Metrics *metrics.Metrics
	// MetricsListener serves /metrics instead of worker.metrics_addr (a
	// test's own listener, so no port can be taken in between).
	MetricsListener net.Listener
}

// announceDrain bounds how long a stopping worker keeps publishing the
// wake-ups and re-announcements it queued.
const announceDrain = 3 * time.Second

// Run wires the worker process from cfg and runs until ctx ends. Shutdown:
// stop consuming, let in-flight callbacks finish (up to
// worker.shutdown_timeout, then cancel them; their messages go back to the
// broker), stop the scheduler and relay, close the broker, then the
// database.
func Run(ctx context.Context, set Settings, reg *callback.Registry, logger *slog.Logger, opts Options) error {
	if opts.Registry != nil {
		reg = opts.Registry
	}
	cfg := set.Worker.WithDefaults()
	sched := set.Scheduler.WithDefaults()
	// The listeners before anything connects: an address in use stops
	// the start at once, naming the setting and the variable that move
	// it, before the worker takes a lease or a delivery (and before
	// scripts/run.sh, seeing "worker: started", starts the gateway).
	pprofAt := "off"
	if cfg.PprofAddr != "" {
		stopPprof, at, err := profiling.Serve("worker.pprof_addr", PprofAddrEnv, cfg.PprofAddr, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
		pprofAt = at
	}
	metricsLn := opts.MetricsListener
	if metricsLn == nil && cfg.MetricsAddr != "off" {
		ln, err := listen.TCP("worker.metrics_addr", MetricsAddrEnv, cfg.MetricsAddr)
		if err != nil {
			return err
		}
		metricsLn = ln
	}
	if metricsLn != nil {
		// Served below; closed here too when the start fails before
		// (a second close once served is harmless).
		defer func() { _ = metricsLn.Close() }()
	}
	storeCfg := set.Store
	if storeCfg.LockWaitTimeout == 0 {
		storeCfg.LockWaitTimeout = LockWaitFor(cfg.HandlerTimeout)
	}
	st, err := store.Open(storeCfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkMySQL(ctx, st, storeCfg.WithDefaults(), logger); err != nil {
		return err
	}
	spans, err := tracing.NewSpanRecorder(ctx, set.Tracing.OTLPEndpoint, "callgate-worker")
	if err != nil {
		return err
	}
	defer func() { _ = spans.Shutdown(context.WithoutCancel(ctx)) }()

	workerID := cfg.ID
	if workerID == "" {
		host, _ := os.Hostname()
		workerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	logger = logger.With("worker_id", workerID)

	m := opts.Metrics
	if m == nil {
		m = metrics.New("worker")
	}
	topo := broker.NewTopology(set.Broker, reg.Kinds())
	mq := broker.Start(set.Broker, "callgate-worker "+workerID, topo, announceDrain, m.BrokerReconnects.Inc, logger)
	defer mq.Stop()
	// A broker that refuses the login stops the start; one that is down is
	// redialled in the background, as always.
	if err := mq.Started(ctx, broker.FirstRoundWait); err != nil {
		return err
	}
	conn, ann := mq.Conn, mq.Announcer
	m.ObserveAnnouncer(ann.Published, ann.Dropped, ann.Nacked)

	pub := downstream.NewPublisher(conn, "callgate-worker")
	defer pub.Close()
	marker := st.NewSentMarker()
	defer marker.Close()

	retry := make(map[string]source.Retry, len(set.Sources))
	platforms := map[string]platform.Platform{}
	for _, s := range set.Sources {
		retry[s.Name] = s.Retry.WithDefaults()
		if s.Preset != "" && !s.Disabled() {
			p, err := platform.New(s.Preset, s.Platform)
			if err != nil {
				return fmt.Errorf("source %s: %w", s.Name, err)
			}
			platforms[s.Name] = p
		}
	}
	// The query answers are verified with the same keys as the gateway's
	// notifications: renewed WeChat Pay platform certificates included,
	// those stored in MySQL first.
	certsCtx, stopCerts := context.WithCancel(ctx)
	defer stopCerts()
	if _, err := wechatcerts.Start(certsCtx, set.Sources, platforms, st, logger, m); err != nil {
		return err
	}
	proc := &Processor{
		Store:           st,
		Registry:        reg,
		Retry:           retry,
		Platforms:       platforms,
		Exchange:        topo.DownstreamExchange(),
		Publisher:       pub,
		Marker:          marker,
		Announcer:       ann,
		ReannounceAfter: sched.Compensation.Threshold,
		HandlerTimeout:  cfg.HandlerTimeout,
		BatchSize:       cfg.BatchSize,
		WorkerID:        workerID,
		Log:             logger,
		Metrics:         m,
		Tracing:         spans,
		Hooks:           opts.Hooks,
	}

	relay := outbox.NewRelay(sched.OutboxRelay, st, pub, logger)
	relay.OnBatch = func(sent int) { m.OutboxPublished.WithLabelValues("relay").Add(float64(sent)) }
	relay.Start(context.WithoutCancel(ctx))
	defer relay.Stop()

	stopJobs, err := startJobs(ctx, set, st, topo, conn, ann, platforms, m, workerID, logger)
	if err != nil {
		return err
	}
	defer stopJobs()

	metricsAt := "off"
	if metricsLn != nil {
		stopHTTP, addr, err := serveMetrics(cfg.MetricsAddr, metricsLn, m, logger)
		if err != nil {
			return err
		}
		defer stopHTTP()
		metricsAt = addr
	}

	// In-flight callbacks run under workCtx, which is cancelled only when
	// the shutdown grace has passed.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var consumers sync.WaitGroup
	for _, kind := range reg.Kinds() {
		kw := cfg.Kind(kind)
		c := &consumer{
			kind: kind, queue: topo.Queue(kind), prefetch: kw.Prefetch, concurrency: kw.Concurrency,
			conn: conn, proc: proc, logger: logger, tag: "callgate-worker-" + kind + "-" + workerID, batchSize: cfg.BatchSize,
		}
		consumers.Go(func() { c.run(ctx, workCtx) })
	}
	// The address bound, not the one asked for: who reads the line learns
	// the port of a ":0" and whether the series reach the network.
	logger.Info("worker: started", "kinds", reg.Kinds(), "metrics", metricsAt, "pprof", pprofAt)

	var refused error
	select {
	case <-ctx.Done():
	case <-mq.Failed():
		// Refused after FirstRoundWait, never having connected: stop as
		// at start (nothing was consumed).
		refused = mq.Conn.Refused()
	}
	logger.Info("worker: stopping, waiting for in-flight callbacks", "timeout", cfg.ShutdownTimeout.String())
	done := make(chan struct{})
	go func() { consumers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cfg.ShutdownTimeout):
		logger.Warn("worker: shutdown timeout, cancelling in-flight callbacks (their messages return to the broker)")
		cancelWork()
		<-done
	}
	if refused != nil {
		return refused
	}
	logger.Info("worker: stopped")
	return nil
}

// checkMySQL asks MySQL once at start: a user, password or database it
// refuses stops the worker (store.AccessError); a server that cannot be
// reached now is a warning, and the pool dials again at every use.
func checkMySQL(ctx context.Context, st *store.Store, cfg store.Config, logger *slog.Logger) error {
	pctx, cancel := context.WithTimeout(ctx, 2*cfg.DialTimeout+time.Second)
	defer cancel()
	err := store.CheckAccess(pctx, st, cfg.DSN)
	var ae *store.AccessError
	if errors.As(err, &ae) {
		return ae
	}
	if err != nil && ctx.Err() == nil {
		logger.Warn("worker: MySQL cannot be reached now; starting anyway, it is dialled again at every use", "error", err)
	}
	return nil
}
