package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// TestStartLineNamesTheMetricsAddress: "worker: started" says where the
// worker's /metrics and its profiler (worker.pprof_addr) listen, as bound
// (the port of a ":0"), or "off".
func TestStartLineNamesTheMetricsAddress(t *testing.T) {
	t.Parallel()
	started := func(t *testing.T, cfg *config.Config) map[string]any {
		t.Helper()
		logs := &testenv.SyncBuffer{}
		log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- worker.Run(ctx, cfg.WorkerSettings(), kinds.Registry(cfg.WorkerSettings()), log, worker.Options{})
		}()
		t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
		var line map[string]any
		require.Eventually(t, func() bool {
			for l := range strings.Lines(logs.String()) {
				var m map[string]any
				if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "worker: started" {
					line = m
				}
			}
			return line != nil
		}, 20*time.Second, 10*time.Millisecond, "the worker did not start:\n%s", logs)
		return line
	}
	t.Run("bound", func(t *testing.T) {
		t.Parallel()
		line := started(t, testenv.Config(t, func(c *config.Config) { c.Worker.MetricsAddr = "127.0.0.1:0"; c.Worker.PprofAddr = "127.0.0.1:0" }))
		addr, _ := line["metrics"].(string)
		require.True(t, strings.HasPrefix(addr, "127.0.0.1:") && addr != "127.0.0.1:0", "the address as bound, not as asked: %v", line)
		pprofAt, _ := line["pprof"].(string)
		require.True(t, strings.HasPrefix(pprofAt, "127.0.0.1:") && pprofAt != "127.0.0.1:0", "the profiler's listener too: %v", line)
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		line := started(t, testenv.Config(t, func(c *config.Config) { c.Worker.MetricsAddr = "off" }))
		require.Equal(t, "off", line["metrics"])
		require.Equal(t, "off", line["pprof"])
	})
}
