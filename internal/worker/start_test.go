package worker_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"callgate/internal/kinds"
	"callgate/internal/metrics"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// TestFirstStartNamesNoSchedulerFailure: the scheduler's jobs start at
// once, before the broker's first connection; the gauges job, which reads
// the unrouted queue, skips that part quietly until the broker is
// connected instead of logging "scheduler: job failed ... broker not
// connected". Here the broker is away at start (a proxy that refuses),
// then comes: no job failure is logged either way. The partitions job
// alone does not run at start (its DDL must not add to a worker's start:
// the migration made the days ahead), only an interval later.
func TestFirstStartNamesNoSchedulerFailure(t *testing.T) {
	u, err := url.Parse(testenv.AMQPURL())
	require.NoError(t, err)
	proxy := testenv.NewProxy(t, u.Host)
	proxy.Down()
	cfg := testenv.Config(t)
	u.Host = proxy.Addr()
	cfg.AMQP.URL = u.String()

	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m := metrics.New("worker")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, cfg.WorkerSettings(), kinds.Registry(cfg.WorkerSettings()), log, worker.Options{Metrics: m})
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	gaugeRuns := func() float64 { return testutil.ToFloat64(m.JobRuns.WithLabelValues("gauges")) }
	require.Eventually(t, func() bool { return gaugeRuns() >= 1 && strings.Contains(logs.String(), "worker: started") },
		10*time.Second, 10*time.Millisecond, "the gauges job ran while the broker was away")
	proxy.Up(t)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `"msg":"broker: connected"`) },
		30*time.Second, 20*time.Millisecond, "the worker connected once the broker came")
	require.NotContains(t, logs.String(), "scheduler: job failed")
	runs := func(job string) float64 { return testutil.ToFloat64(m.JobRuns.WithLabelValues(job)) }
	require.Eventually(t, func() bool { return runs("compensation") >= 2 }, 30*time.Second, 20*time.Millisecond, "the fleet's jobs run")
	require.Zero(t, runs("partitions"), "not at start")
}
