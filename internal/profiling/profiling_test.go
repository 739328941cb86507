package profiling_test

import (
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/profiling"
)

// TestAddressInUseNamesTheSettingAndVariable: the profiler's port taken
// by another process stops the start with the setting and the variable
// that move it, as every other listener's does.
func TestAddressInUseNamesTheSettingAndVariable(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	addr := taken.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	_, _, err = profiling.Serve("worker.pprof_addr", "CALLGATE_WORKER_PPROF_ADDR", addr, log)
	require.EqualError(t, err, "worker.pprof_addr: listen "+addr+": address already in use; "+
		"set worker.pprof_addr (or CALLGATE_WORKER_PPROF_ADDR) to a free address")

	stop, at, err := profiling.Serve("http.pprof_addr", "CALLGATE_HTTP_PPROF_ADDR", "127.0.0.1:0", log)
	require.NoError(t, err)
	defer stop()
	require.NotEqual(t, "127.0.0.1:0", at, "the address bound")
}
