package admin

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Role is what an operator may do. Every write endpoint of the API and the
// console checks it on the server; the page hiding buttons is a courtesy.
type Role string

const (
	// RoleViewer reads: every page and read endpoint.
	RoleViewer Role = "viewer"
	// RoleOperator also replays, single and bulk, and cancels replay jobs.
	RoleOperator Role = "operator"
)

// ParseRole reads "viewer" or "operator".
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleViewer, RoleOperator:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: want viewer or operator", s)
}

// CanWrite reports whether the role may change rows (replay, cancel).
func (r Role) CanWrite() bool { return r == RoleOperator }

// Identity is who made a request: the name the audit trail and replay
// jobs record, the role, and for a single sign-on user the ID token's
// subject, e-mail and name.
type Identity struct {
	// Kind is how they got in: KindToken or KindSSO.
	Kind string
	// Actor names them in the audit trail: a token's name, or a single
	// sign-on user's verified e-mail (else "sso:" and their user name,
	// name or subject).
	Actor   string
	Role    Role
	Subject string
	Email   string
	Name    string
}

// The kinds of Identity (and of admin_session rows).
const (
	KindToken = "token"
	KindSSO   = "sso"
)

// SSO reports whether the identity signed in with single sign-on.
func (id Identity) SSO() bool { return id.Kind == KindSSO }

// CtxIdentity is the gin context key of the request's Identity.
const CtxIdentity = "callgate.admin.identity"

// SetIdentity puts the authenticated identity on the request.
func SetIdentity(c *gin.Context, id Identity) {
	c.Set(CtxActor, id.Actor)
	c.Set(CtxIdentity, id)
}

// RequestIdentity is the identity the authentication middleware admitted.
func RequestIdentity(c *gin.Context) Identity {
	v, _ := c.Get(CtxIdentity)
	id, _ := v.(Identity)
	return id
}

// NeedsOperator is the reason a viewer's write is refused.
func NeedsOperator(id Identity) string {
	return fmt.Sprintf("this needs the operator role; %s is a %s", id.Actor, id.Role)
}

// operator admits only identities that may write: a viewer gets 403 and
// nothing changes. Mounted on every write route of the API.
func (h *Handler) operator(c *gin.Context) {
	id := RequestIdentity(c)
	if !id.Role.CanWrite() {
		h.Log.WarnContext(c.Request.Context(), "admin: refused a write to a viewer",
			"path", c.Request.URL.Path, "actor", id.Actor, "role", id.Role, "remote", ClientAddr(c))
		apiError(c, http.StatusForbidden, NeedsOperator(id))
		return
	}
	c.Next()
}
