// Package clientaddr finds a request's client address: the TCP peer, or,
// when the peer is one of the trusted proxies (admin.trusted_proxies),
// the address it forwarded in X-Forwarded-For. It reads the setting too,
// so that config can check it without the HTTP server's packages: the
// operator surface (internal/admin) asks it per request.
package clientaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Proxies are the trusted proxies in front of the operator surface
// (admin.trusted_proxies).
type Proxies []netip.Prefix

// ParseProxies reads admin.trusted_proxies: IPs or CIDR prefixes.
func ParseProxies(list []string) (Proxies, error) {
	var out Proxies
	for i, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Bits() == 0 {
				return nil, fmt.Errorf("trusted_proxies[%d]: %q trusts every address: name the proxies' own addresses", i, s)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted_proxies[%d]: %q is neither an IP address nor a CIDR prefix", i, s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func (p Proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pr := range p {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// ClientOf is the client of a request from remote (the TCP peer, host and
// port) carrying the X-Forwarded-For values forwarded: the peer, or, when
// the peer is a trusted proxy, the rightmost forwarded address that is not
// one (the proxies append what they saw, so what lies left of the first
// untrusted hop is the client's to write).
func (p Proxies) ClientOf(remote string, forwarded []string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || len(p) == 0 || !p.trusts(peer) {
		return host
	}
	var hops []string
	for _, v := range forwarded {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := host
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := parseHop(hops[i])
		if err != nil {
			break // a hop no proxy of ours wrote: stop at what we know
		}
		client = a.Unmap().String()
		if !p.trusts(a) {
			break
		}
	}
	return client
}

// parseHop reads one X-Forwarded-For entry: an address, or an address and
// port as some proxies write it ("1.2.3.4:5678", "[2001:db8::1]:443").
func parseHop(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a, nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr(), nil
}
