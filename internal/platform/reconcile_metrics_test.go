package platform_test

import (
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
)

// workerMetricsOn serves the worker's /metrics on a free loopback port
// (a config mutation for testenv.StartPlatform) and returns its URL.
func workerMetricsOn(t *testing.T, c *config.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c.Worker.MetricsAddr = addr
	return "http://" + addr + "/metrics"
}

// counterAt reads one series of the /metrics at url (0 when absent).
func counterAt(t *testing.T, url, name, labels string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0 // not serving yet
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\d+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

// queries is callgate_reconcile_queries_total{source,outcome} on the worker.
func queries(t *testing.T, url, source, outcome string) int {
	return counterAt(t, url, "callgate_reconcile_queries_total", `outcome="`+outcome+`",process="worker",source="`+source+`"`)
}

// found is callgate_reconcile_found_total{source,kind} on the worker.
func found(t *testing.T, url, source, kind string) int {
	return counterAt(t, url, "callgate_reconcile_found_total", `kind="`+kind+`",process="worker",source="`+source+`"`)
}
