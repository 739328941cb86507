package config_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/worker"
)

// TestWorkerMetricsAddr: the worker's /metrics listens on this machine
// only unless an address says otherwise: the default and the shipped
// file are loopback; an address in the file or in
// CALLGATE_WORKER_METRICS_ADDR is served as given (":9090" is every
// interface), the variable winning over the file, and it is blamed for
// what it set.
func TestWorkerMetricsAddr(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	t.Setenv(worker.MetricsAddrEnv, "")
	cfg, err := config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9090", cfg.Worker.MetricsAddr, "a file that leaves it out")

	shipped, err := config.Load(filepath.Join("..", "..", "configs", "callgate.yaml"), kinds)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9090", shipped.Worker.MetricsAddr, "the shipped file")

	cfg, err = config.Parse([]byte("worker: {metrics_addr: ':9090'}\n"+valid), kinds)
	require.NoError(t, err)
	require.Equal(t, ":9090", cfg.Worker.MetricsAddr, "an address the file gives is honoured")

	require.Equal(t, "CALLGATE_WORKER_METRICS_ADDR", worker.MetricsAddrEnv)
	t.Setenv("CALLGATE_WORKER_METRICS_ADDR", "0.0.0.0:9191")
	cfg, err = config.Parse([]byte("worker: {metrics_addr: '127.0.0.1:9092'}\n"+valid), kinds)
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9191", cfg.Worker.MetricsAddr, "the variable wins over the file")
	require.Equal(t, "CALLGATE_WORKER_METRICS_ADDR", config.Origin("no-such-file.yaml", "worker.metrics_addr"))

	t.Setenv("CALLGATE_WORKER_METRICS_ADDR", "off")
	cfg, err = config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	require.Equal(t, "off", cfg.Worker.MetricsAddr)
}
