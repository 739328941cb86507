package testenv

import (
	"strings"
	"testing"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// Proxy is a TCP proxy in front of a real service (Toxiproxy, embedded),
// used to take MySQL or RabbitMQ away from one process under test without
// stopping the shared server.
type Proxy struct {
	p *toxiproxy.Proxy
}

// NewProxy starts a proxy on a free loopback port to upstream (host:port).
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "p"+Suffix(), "127.0.0.1:0", upstream)
	require.NoError(t, p.Start())
	t.Cleanup(p.Stop)
	return &Proxy{p: p}
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.p.Listen }

// Down closes the listener and every proxied connection: the service looks
// dead (connection refused) to whoever uses the proxy.
func (p *Proxy) Down() { p.p.Stop() }

// Up starts accepting again on the same address.
func (p *Proxy) Up(t testing.TB) {
	t.Helper()
	require.NoError(t, p.p.Start())
}

// Move points the proxy at another upstream, as a failover moves a
// virtual IP: the connections through it are closed and new ones reach
// upstream, on the same address.
func (p *Proxy) Move(t testing.TB, upstream string) {
	t.Helper()
	p.p.Stop()
	p.p.Upstream = upstream
	require.NoError(t, p.p.Start())
}

// Hang makes the proxy swallow all data without answering (a hung server).
func (p *Proxy) Hang(t testing.TB) {
	t.Helper()
	_, err := p.p.Toxics.AddToxicJson(strings.NewReader(`{"name":"hang","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`))
	require.NoError(t, err)
}
