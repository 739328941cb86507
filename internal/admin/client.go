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
	c.Set(ctxClient, h.Proxies.clientOf(c.Request.RemoteAddr, c.Request.Header.Values("X-Forwarded-For")))
	c.Next()
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
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
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
