package worker_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/metrics"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

func compensationRuns(m *metrics.Metrics) float64 {
	return testutil.ToFloat64(m.JobRuns.WithLabelValues("compensation"))
}

// TestThreeWorkersRunEachJobOncePerTick: with three workers on one
// database, one holds the scheduler lease and runs the jobs; when it stops,
// another takes over.
func TestThreeWorkersRunEachJobOncePerTick(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Scheduler.Lease = 3 * time.Second // long enough that a busy machine never loses it by accident
		c.Scheduler.Compensation.Interval = 100 * time.Millisecond
	})
	ms := make([]*metrics.Metrics, 3)
	ws := make([]*testenv.Worker, 3)
	began := time.Now()
	for i := range ms {
		ms[i] = metrics.New("worker")
		c := *cfg
		c.Worker.ID = "fleet-" + string(rune('a'+i))
		ws[i] = testenv.StartWorker(t, &c, worker.Options{Metrics: ms[i]})
	}
	// Some ticks of the job, however long the workers took to start on a
	// busy machine (a fixed 2 s once saw none at all).
	require.Eventually(t, func() bool {
		total := 0.0
		for _, m := range ms {
			total += compensationRuns(m)
		}
		return total >= 10
	}, 30*time.Second, 20*time.Millisecond, "the fleet runs the job")
	leader := -1
	total := 0.0
	for i, m := range ms {
		if n := compensationRuns(m); n > 0 {
			require.Equal(t, -1, leader, "only one worker runs the job")
			leader = i
			total += n
		}
	}
	require.NotEqual(t, -1, leader)
	ticks := float64(time.Since(began) / cfg.Scheduler.Compensation.Interval)
	require.LessOrEqual(t, total, ticks+2, "once per tick across the fleet")

	before := map[int]float64{}
	for i, m := range ms {
		before[i] = compensationRuns(m)
	}
	require.NoError(t, ws[leader].Stop()) // graceful: releases the lease
	require.Eventually(t, func() bool {
		for i, m := range ms {
			if i != leader && compensationRuns(m) > before[i] {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "another worker takes over the jobs") // at its next tick; a loaded machine delays ticks
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestMetricsEndpoints(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	e := setup(t, worker.Options{MetricsListener: ln}, func(c *config.Config) {
		c.Scheduler.Gauges.Interval = 100 * time.Millisecond
	})
	order := testenv.CreateOrders(t, e.cfg, "metrics", 1)[0]
	id := e.pay(t, order, 1000, "PAY-M")
	e.waitStatus(t, id, callback.StatusSuccess)
	bad := testenv.Post(t, e.gw.URL, "paydemo", []byte(`{}`), http.Header{})
	require.Equal(t, http.StatusUnauthorized, bad.Status)

	gw := scrape(t, e.gw.URL+"/metrics")
	for _, want := range []string{
		`callgate_intake_requests_total{process="gateway",result="accepted",source="paydemo"} 1`,
		`callgate_intake_requests_total{process="gateway",result="unauthorized",source="paydemo"} 1`,
		`callgate_intake_duration_seconds_count{process="gateway",source="paydemo"} 2`,
		`callgate_announcements_total{process="gateway",result="published"} 1`,
		`callgate_broker_reconnects_total{process="gateway"} 0`,
	} {
		require.Contains(t, gw, want)
	}
	// The gauges refresh on their interval, and the worker counts a
	// callback just after its commit, which waitStatus saw: all of it
	// shows within a bound on a hang, however loaded the machine.
	wants := []string{
		`callgate_backlog_pending{process="worker",source="paydemo"} 0`,
		`callgate_scheduler_leader{process="worker"} 1`,
		`callgate_outbox_pending{process="worker"} 0`,
		`callgate_callbacks_processed_total{kind="payment",outcome="success",process="worker"} 1`,
		`callgate_callback_attempts_total{kind="payment",process="worker"} 1`,
		`callgate_outbox_published_total{path="fast",process="worker"} 2`,
		`callgate_processing_duration_seconds_count{kind="payment",process="worker"} 1`,
		`callgate_failed_callbacks{process="worker",source="paydemo"} 0`,
		`callgate_scheduler_job_runs_total{job="compensation",process="worker"}`,
	}
	var wk string
	require.Eventually(t, func() bool {
		wk = scrape(t, "http://"+addr+"/metrics")
		for _, want := range wants {
			if !strings.Contains(wk, want) {
				return false
			}
		}
		return true
	}, time.Minute, 20*time.Millisecond, "the worker's metrics")
	for _, want := range wants {
		require.Contains(t, wk, want)
	}
}
