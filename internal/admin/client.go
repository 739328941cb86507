package admin

import (
	"net"

	"github.com/gin-gonic/gin"
)

// ctxClient is the gin context key of the request's client address.
const ctxClient = "callgate.admin.client"

// Client finds the request's client once, for ClientAddr: the TCP peer,
// or, when the peer is a trusted proxy, the address it forwarded
// (clientaddr.Proxies.ClientOf).
func (h *Handler) Client(c *gin.Context) {
	forwarded := c.Request.Header.Values("X-Forwarded-For")
	if len(forwarded) > 0 && len(h.Proxies) == 0 && h.forwardedSeen.CompareAndSwap(false, true) && h.Log != nil {
		h.Log.Warn("admin: requests carry X-Forwarded-For but admin.trusted_proxies is empty: everyone behind that proxy is one client address, sharing its sign-in budgets; list the proxy's own address there",
			"peer", ClientAddr(c))
	}
	c.Set(ctxClient, h.Proxies.ClientOf(c.Request.RemoteAddr, forwarded))
	c.Next()
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
