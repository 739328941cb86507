package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/time/rate"

	"callgate/internal/outbound"
)

// Single sign-on: OpenID Connect's authorization code flow with PKCE,
// state and nonce. go-oidc discovers the provider from its issuer URL and
// checks the ID token (signature against the provider's published keys,
// issuer, audience, expiry); golang.org/x/oauth2 runs the code exchange.
// What a sign-in carries between its start and the provider's redirect
// back (state, nonce, PKCE verifier, the page to return to) lives in a
// short-lived cookie MACed with a key derived from the client secret, so
// starting a sign-in costs the server nothing to store and any gateway of
// the fleet can finish it.

// SSOConfig is admin.oidc.
type SSOConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is where the provider sends the browser back; its path
	// is SSOCallbackPath.
	RedirectURL string
	// RolesClaim names the ID token claim whose values are matched
	// against Operators and Viewers; a dotted path reaches into objects
	// (realm_access.roles). Default "groups".
	RolesClaim string
	Operators  []string
	Viewers    []string
	// Only hides the token form: people sign in with SSO alone (API
	// tokens keep working for the CLI).
	Only bool
	// MaxSession bounds a session's life without signing in again.
	MaxSession time.Duration
	// Scopes asked for; default openid, email, profile.
	Scopes []string
}

const (
	// SSOCallbackPath is the redirect URL's path.
	SSOCallbackPath = "/admin/oidc/callback"
	// SSOFlowCookie carries a sign-in from its start to the callback.
	SSOFlowCookie = "callgate_oidc"
	// SSOFlowPath scopes the flow cookie to the callback.
	SSOFlowPath = "/admin/oidc"
	// SSOFlowMaxAge bounds how long a person may take at the provider.
	SSOFlowMaxAge = 10 * time.Minute
	// RolesClaimDefault is admin.oidc.roles_claim when unset.
	RolesClaimDefault = "groups"
	// MaxSessionDefault is admin.oidc.max_session when unset.
	MaxSessionDefault = 8 * time.Hour

	// ssoHTTPTimeout bounds every call to the provider.
	ssoHTTPTimeout = 10 * time.Second
	// ssoRediscoverEvery spaces discovery attempts a login page can
	// cause while the provider is unreachable: unauthenticated requests
	// cannot turn into a stream of calls to it.
	ssoRediscoverEvery = 5 * time.Second
	// maxCallbackParam bounds code and state as read from the query.
	maxCallbackParam = 4096
	// maxActor is the width of the audit's actor column.
	maxActor = 255
)

// SSO signs operators in with an OpenID provider.
type SSO struct {
	cfg     SSOConfig
	log     *slog.Logger
	client  *http.Client
	flowKey []byte

	mu       sync.Mutex
	found    *ssoProvider
	lastErr  error
	lastTry  time.Time
	tryMutex sync.Mutex // one discovery at a time

	spentMu    sync.Mutex
	spent      map[string]int64 // states of flows completed, until they expire
	spentOrder []spentFlow      // spent's keys in the order spent, for pruning

	// exchanges bounds the calls to the provider's token endpoint, all
	// clients together: a flow cookie is free to start, so its callbacks
	// wait their turn here rather than reach the provider at any rate.
	exchanges *rate.Limiter
}

// NewSSO returns the single sign-on of cfg; nothing is fetched until Run
// or the first sign-in.
func NewSSO(cfg SSOConfig, log *slog.Logger) *SSO {
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = RolesClaimDefault
	}
	if cfg.MaxSession <= 0 {
		cfg.MaxSession = MaxSessionDefault
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "email", "profile"}
	}
	m := hmac.New(sha256.New, []byte(cfg.ClientSecret))
	m.Write([]byte("callgate-oidc-flow\x00" + cfg.Issuer + "\x00" + cfg.ClientID))
	return &SSO{cfg: cfg, log: log, client: outbound.Client(outbound.Options{Timeout: ssoHTTPTimeout}), flowKey: m.Sum(nil),
		exchanges: rate.NewLimiter(ssoExchangeRate, ssoExchangeBurst)}
}

// Only reports admin.oidc.only: no token form on the login page.
func (s *SSO) Only() bool { return s.cfg.Only }

// MaxSession is how long a single sign-on session lives.
func (s *SSO) MaxSession() time.Duration { return s.cfg.MaxSession }

// RolesClaim is the claim read for the role.
func (s *SSO) RolesClaim() string { return s.cfg.RolesClaim }
