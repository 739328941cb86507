package admin

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/gin-gonic/gin"
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

// ctxClient is the gin context key of the request's client address.
const ctxClient = "callgate.admin.client"

// Client finds the request's client once, for ClientAddr: the TCP peer,
// or, when the peer is a trusted proxy, the rightmost address of
// X-Forwarded-For that is not one (the proxies append what they saw, so
// what lies left of the first untrusted hop is the client's to write).
func (h *Handler) Client(c *gin.Context) {
	forwarded := c.Request.Header.Values("X-Forwarded-For")
	if len(forwarded) > 0 && len(h.Proxies) == 0 && h.forwardedSeen.CompareAndSwap(false, true) && h.Log != nil {
		h.Log.Warn("admin: requests carry X-Forwarded-For but admin.trusted_proxies is empty: everyone behind that proxy is one client address, sharing its sign-in budgets; list the proxy's own address there",
			"peer", ClientAddr(c))
	}
	c.Set(ctxClient, h.Proxies.clientOf(c.Request.RemoteAddr, forwarded))
	c.Next()
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

func (p Proxies) clientOf(remote string, forwarded []string) string {
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

// ClientAddr is the request's client: the TCP peer, or, behind a trusted
// proxy (admin.trusted_proxies), the address it forwarded.
func ClientAddr(c *gin.Context) string {
	if v, ok := c.Get(ctxClient); ok {
		return v.(string)
	}
	host, _, err := net.SplitHostPort(c.Request.RemoteAddr)
	if err != nil {
		return c.Request.RemoteAddr
	}
	return host
}
