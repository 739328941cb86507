package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/gateway"
	"callgate/internal/logging"
)

// Gateway is a gateway running in-process on a free port.
type Gateway struct {
	URL  string
	Cfg  *config.Config
	stop context.CancelFunc
	done chan error
}

// startBound is how long a gateway may take to answer after its start: a
// bound for a start that hangs, not a speed (5 s was passed on a machine
// running two make tests at once).
const startBound = time.Minute

// StartGateway runs the whole gateway (store, broker, intake) from cfg
// until the test ends.
func StartGateway(t testing.TB, cfg *config.Config) *Gateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := StartGatewayOn(t, cfg, ln, "http")
	require.Eventually(t, func() bool {
		resp, err := http.Get(g.URL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, startBound, 20*time.Millisecond, "gateway did not come up")
	return g
}

// StartGatewayOn runs the gateway on ln; scheme names the URL's scheme.
func StartGatewayOn(t testing.TB, cfg *config.Config, ln net.Listener, scheme string) *Gateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{URL: scheme + "://" + ln.Addr().String(), Cfg: cfg, stop: cancel, done: make(chan error, 1)}
	log := Logger(t, cfg)
	go func() { g.done <- gateway.Run(ctx, cfg, log, ln) }()
	t.Cleanup(func() { _ = g.Stop() })
	return g
}

// WaitReady waits until /readyz answers 200 (MySQL reachable, broker
// connected and topology declared).
func (g *Gateway) WaitReady(t testing.TB) {
	t.Helper()
	WaitReadyURL(t, g.URL)
}

// WaitReadyURL waits until baseURL/readyz answers 200.
func WaitReadyURL(t testing.TB, baseURL string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(baseURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, startBound, 20*time.Millisecond, "gateway not ready")
}

// Stop shuts the gateway down gracefully and returns Run's error.
func (g *Gateway) Stop() error {
	g.stop()
	select {
	case err, ok := <-g.done:
		if ok {
			close(g.done)
		}
		return err
	case <-time.After(30 * time.Second):
		return context.DeadlineExceeded
	}
}

// Logger returns a logger for a component under test: quiet unless
// CALLGATE_TEST_LOG is set.
func Logger(t testing.TB, cfg *config.Config) *slog.Logger {
	w := io.Discard
	if testingVerboseLogs() {
		w = os.Stderr
	}
	return logging.New(logging.Config{Level: "debug", Format: "text"}, w)
}

// AdminCall does an admin API request with a bearer token (none when
// empty) and a JSON body (a string is sent as is, anything else
// marshalled; nil: no body), decodes the answer into out when not nil and
// returns the status.
func AdminCall(t testing.TB, baseURL, method, path, token string, body, out any) int {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, baseURL+path, r)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode
}
