package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/demo"
	"callgate/internal/gateway"
	"callgate/internal/logging"
	"callgate/internal/testenv"
)

// runListeners runs the gateway on ls until the test ends, its log in
// JSON; done receives RunListeners' error.
func runListeners(t *testing.T, cfg *config.Config, ls gateway.Listeners) (logs *testenv.SyncBuffer, done chan error) {
	t.Helper()
	logs = &testenv.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		done <- gateway.RunListeners(ctx, cfg, logging.New(logging.Config{Level: "info", Format: "json"}, logs), ls)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
		}
	})
	return logs, done
}

// listeningLine is the start-up line that names the listeners, once
// logged.
func listeningLine(t *testing.T, logs *testenv.SyncBuffer) map[string]any {
	t.Helper()
	var line map[string]any
	require.Eventually(t, func() bool {
		for l := range strings.Lines(logs.String()) {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "gateway: listening" {
				line = m
			}
		}
		return line != nil
	}, 10*time.Second, 10*time.Millisecond, "no listening line:\n%s", logs)
	require.Equal(t, 1, strings.Count(logs.String(), `"msg":"gateway: listening"`), "one line for every listener")
	return line
}

func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// TestStartLineNamesEveryListener: the gateway's start-up line says where
// the intake listens, where the console and admin API are, and where
// /metrics is or that it is off, each address as bound.
func TestStartLineNamesEveryListener(t *testing.T) {
	t.Parallel()
	t.Run("one listener, metrics off", func(t *testing.T) {
		t.Parallel()
		cfg := testenv.Config(t, func(c *config.Config) { c.Metrics.Public = false })
		pub := loopbackListener(t)
		logs, _ := runListeners(t, cfg, gateway.Listeners{Public: pub})
		line := listeningLine(t, logs)
		require.Equal(t, pub.Addr().String(), line["public"])
		require.Equal(t, pub.Addr().String(), line["admin"], "the console is on the public listener")
		require.Equal(t, "off", line["metrics"])
	})
	t.Run("one listener, metrics.public", func(t *testing.T) {
		t.Parallel()
		cfg := testenv.Config(t, func(c *config.Config) { c.Metrics.Public = true })
		pub := loopbackListener(t)
		logs, _ := runListeners(t, cfg, gateway.Listeners{Public: pub})
		line := listeningLine(t, logs)
		require.Equal(t, pub.Addr().String(), line["public"])
		require.Equal(t, pub.Addr().String(), line["metrics"])
	})
	t.Run("an admin listener", func(t *testing.T) {
		t.Parallel()
		cfg := testenv.Config(t)
		pub, adm := loopbackListener(t), loopbackListener(t)
		logs, _ := runListeners(t, cfg, gateway.Listeners{Public: pub, Admin: adm})
		line := listeningLine(t, logs)
		require.Equal(t, pub.Addr().String(), line["public"])
		require.Equal(t, adm.Addr().String(), line["admin"])
		require.Equal(t, adm.Addr().String(), line["metrics"])
	})
}

// TestDemoTokenOnlyOnThisMachine: the published demo admin token opens the
// operator API, so a gateway that would accept it on an address other
// machines reach (":0" binds every interface) refuses to start, naming
// the setting and what to do, and serves nothing. A loopback admin
// listener, or a token of one's own, lets demo mode's intake listen
// anywhere.
func TestDemoTokenOnlyOnThisMachine(t *testing.T) {
	t.Parallel()
	demoMode := func(c *config.Config) { c.Demo, c.Admin.Token, c.HTTP.Addr = true, demo.AdminToken, ":0" }

	t.Run("refused on every interface", func(t *testing.T) {
		t.Parallel()
		logs, done := runListeners(t, testenv.Config(t, demoMode), gateway.Listeners{})
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the gateway served the demo token on every interface", "%s", logs)
		}
		var se config.SettingError
		require.True(t, errors.As(err, &se), "%v", err)
		require.Equal(t, "http.addr", se.Setting())
		require.ErrorContains(t, err, "the published demo admin token")
		require.ErrorContains(t, err, "CALLGATE_ADMIN_TOKEN")
		require.NotContains(t, logs.String(), "gateway: listening", "nothing served")
	})
	t.Run("a loopback admin listener", func(t *testing.T) {
		t.Parallel()
		adm := loopbackListener(t)
		logs, _ := runListeners(t, testenv.Config(t, demoMode), gateway.Listeners{Admin: adm})
		line := listeningLine(t, logs)
		_, port, err := net.SplitHostPort(line["public"].(string))
		require.NoError(t, err)
		testenv.WaitReadyURL(t, "http://127.0.0.1:"+port)
		require.Equal(t, http.StatusOK, testenv.AdminCall(t, "http://"+adm.Addr().String(), http.MethodGet, "/admin/api/stats", demo.AdminToken, nil, nil))
	})
	t.Run("a token of one's own", func(t *testing.T) {
		t.Parallel()
		cfg := testenv.Config(t, demoMode, func(c *config.Config) { c.Admin.Token = "ops:a-token-of-our-own" })
		logs, _ := runListeners(t, cfg, gateway.Listeners{})
		line := listeningLine(t, logs)
		_, port, err := net.SplitHostPort(line["public"].(string))
		require.NoError(t, err)
		testenv.WaitReadyURL(t, "http://127.0.0.1:"+port)
	})
}
