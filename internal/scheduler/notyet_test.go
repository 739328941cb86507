package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"callgate/internal/metrics"
	"callgate/internal/scheduler"
	"callgate/internal/testenv"
)

// TestNotYetNamesNoFailure: a job whose error wraps ErrNotYet (it skipped
// what needs the broker before its first connect) logs no failure; any
// other error is a WARN "scheduler: job failed" as before.
func TestNotYetNamesNoFailure(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m := metrics.New("worker")
	s, err := scheduler.New(log, m, []scheduler.Job{
		{Name: "waiting", Interval: time.Hour, Run: func(context.Context) error {
			return fmt.Errorf("error reading unrouted notifications: broker: %w", scheduler.ErrNotYet)
		}},
		{Name: "broken", Interval: time.Hour, Run: func(context.Context) error { return errors.New("boom") }},
	})
	require.NoError(t, err)
	s.Start()
	defer func() { _ = s.Stop() }()
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(m.JobRuns.WithLabelValues("waiting")) == 1 && strings.Contains(logs.String(), "boom")
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, s.Stop())
	require.Contains(t, logs.String(), `"msg":"scheduler: job failed","job":"broken","error":"boom"`)
	require.NotContains(t, logs.String(), `"job":"waiting"`)
}
