package clientaddr_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/clientaddr"
)

// TestClientBehindTrustedProxies: behind a trusted proxy the client is
// the rightmost forwarded address that is not a trusted proxy; from
// anyone else X-Forwarded-For is ignored.
func TestClientBehindTrustedProxies(t *testing.T) {
	t.Parallel()
	p, err := clientaddr.ParseProxies([]string{"10.0.0.0/8", " 192.0.2.7 "})
	require.NoError(t, err)
	for _, tc := range []struct {
		remote    string
		forwarded []string
		want      string
	}{
		{"203.0.113.9:4000", []string{"198.51.100.1"}, "203.0.113.9"},                   // not a proxy: the peer
		{"10.1.2.3:4000", nil, "10.1.2.3"},                                              // a proxy that forwarded nothing
		{"10.1.2.3:4000", []string{"198.51.100.1"}, "198.51.100.1"},                     // one proxy
		{"10.1.2.3:4000", []string{"6.6.6.6, 198.51.100.1, 192.0.2.7"}, "198.51.100.1"}, // two proxies; the client wrote 6.6.6.6
		{"10.1.2.3:4000", []string{"6.6.6.6", "198.51.100.1"}, "198.51.100.1"},          // the header twice
		{"10.1.2.3:4000", []string{"garbage, 198.51.100.1"}, "198.51.100.1"},
		{"10.1.2.3:4000", []string{"198.51.100.1, garbage"}, "10.1.2.3"}, // our proxy wrote no garbage: stop
		{"[::ffff:10.1.2.3]:4000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"10.1.2.3:4000", []string{"198.51.100.1:5678"}, "198.51.100.1"}, // a proxy that writes the port
		{"10.1.2.3:4000", []string{"[2001:db8::1]:443"}, "2001:db8::1"},  // and in brackets
		{"10.1.2.3:4000", []string{"6.6.6.6, 10.9.9.9:80"}, "6.6.6.6"},   // a proxy's hop with its port
	} {
		require.Equal(t, tc.want, p.ClientOf(tc.remote, tc.forwarded), "%s %q", tc.remote, tc.forwarded)
	}
	require.Equal(t, "10.1.2.3", clientaddr.Proxies(nil).ClientOf("10.1.2.3:1", []string{"198.51.100.1"}), "no trusted proxies: the peer")
	_, err = clientaddr.ParseProxies([]string{"10.0.0.0/33"})
	require.ErrorContains(t, err, `trusted_proxies[0]: "10.0.0.0/33"`)
	for _, all := range []string{"0.0.0.0/0", "::/0"} {
		_, err = clientaddr.ParseProxies([]string{"192.0.2.7", all})
		require.ErrorContains(t, err, "trusted_proxies[1]", "%s trusts every client to name itself", all)
	}
}
