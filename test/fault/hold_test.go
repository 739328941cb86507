//go:build fault

package fault

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A fault test sends what must meet a fault only once the fault is in
// place (the broker refusing, the port closed, the replica stopped), and
// keeps the fault until the load has met it: how long a stop or a start
// takes depends on the machine (a RabbitMQ stop_app took 11 s on a busy
// one, and a load timed for a quick one was over before the outage
// began). The limits below bound a wait that would otherwise hang; none
// of them is a duration a test relies on.

// faultLimit bounds each wait for a fault to be in place, or for the load
// to meet it.
const faultLimit = 2 * time.Minute

// waitFor polls cond until it holds, and fails the test, saying what did
// not happen, if it does not within limit.
func waitFor(t *testing.T, limit time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "waited "+limit.String()+" in vain: "+what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holdFault returns once the fault, in place since since, has lasted
// least (the scenario's length of outage) and met holds (the load met
// it); the test fails if met does not hold within faultLimit.
func holdFault(t *testing.T, since time.Time, least time.Duration, met func() bool, what string) {
	t.Helper()
	waitFor(t, least+faultLimit, func() bool { return time.Since(since) >= least && met() }, what)
}

// refused reports whether a TCP connection to addr is refused: nothing
// listens there any more.
func refused(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// waitRefused waits until addr refuses connections (the server, or the
// proxy standing for it, is gone).
func waitRefused(t *testing.T, addr, what string) {
	t.Helper()
	waitFor(t, faultLimit, func() bool { return refused(addr) }, what+" refuses connections on "+addr)
}
