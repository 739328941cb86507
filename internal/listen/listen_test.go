package listen_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/listen"
)

// TestAddressInUseSaysHowToChooseAnother: a port another process holds
// names the setting and the environment variable that choose the
// address, not only the address; other failures read as the system's
// words alone.
func TestAddressInUseSaysHowToChooseAnother(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	addr := taken.Addr().String()

	_, err = listen.TCP("worker.metrics_addr", "CALLGATE_WORKER_METRICS_ADDR", addr)
	require.True(t, errors.Is(err, syscall.EADDRINUSE), "%v", err)
	require.EqualError(t, err, "worker.metrics_addr: listen "+addr+": address already in use; "+
		"set worker.metrics_addr (or CALLGATE_WORKER_METRICS_ADDR) to a free address")
	var le *listen.Error
	require.ErrorAs(t, err, &le)
	require.Equal(t, "worker.metrics_addr", le.Setting())

	_, err = listen.TCP("http.admin_addr", "", addr)
	require.EqualError(t, err, "http.admin_addr: listen "+addr+": address already in use; set http.admin_addr to a free address")

	_, err = listen.TCP("http.addr", "CALLGATE_HTTP_ADDR", "no-such-host.invalid:8080")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "free address", "only an address in use")
}
