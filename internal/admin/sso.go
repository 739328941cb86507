package admin

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
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
// back (state, nonce, PKCE verifier, the page to return to, a digest of
// the address that started it) lives in a short-lived cookie MACed with
// the deployment's random key (store.DeploymentKey, shared by the fleet
// through the database), so starting a sign-in costs the server nothing
// to store and any gateway of the fleet can finish it. The key depends on
// no configured secret: anyone can collect flow cookies, and a key
// derived from the client secret would let them test guesses of it
// offline.

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
	// ssoKeyTimeout bounds one reading of the flow cookie's key.
	ssoKeyTimeout = 5 * time.Second
	// ssoKeyRetryMax is the longest pause between readings of the key
	// while the database cannot be reached.
	ssoKeyRetryMax = 10 * time.Second
	// minFlowKeyBytes is the shortest flow cookie key taken.
	minFlowKeyBytes = 32
	// ssoRediscoverEvery spaces discovery attempts a login page can
	// cause while the provider is unreachable: unauthenticated requests
	// cannot turn into a stream of calls to it.
	ssoRediscoverEvery = 5 * time.Second
	// maxCallbackParam bounds code and state as read from the query.
	maxCallbackParam = 4096
	// maxActor is the width of the audit's actor column.
	maxActor = 255
)

// FlowKeySource reads the flow cookie's MAC key, at least
// minFlowKeyBytes: the deployment's (store.DeploymentKey), so that every
// gateway of the fleet accepts the others' flow cookies.
type FlowKeySource func(ctx context.Context) ([]byte, error)

// SSO signs operators in with an OpenID provider.
type SSO struct {
	cfg    SSOConfig
	log    *slog.Logger
	client *http.Client
	keys   FlowKeySource
	// flowKey is nil until keys gave it: no sign-in starts or finishes
	// before (LoadFlowKey).
	flowKey atomic.Pointer[[]byte]

	mu       sync.Mutex
	found    *ssoProvider
	lastErr  error
	lastTry  time.Time
	tryMutex sync.Mutex // one discovery at a time

	spentMu    sync.Mutex
	spent      map[string]int64 // states of flows completed, until they expire
	spentOrder []spentFlow      // spent's keys in the order spent, for pruning

	// exchanges bounds the calls to the provider's token endpoint, all
	// clients together: a flow cookie is cheap to start, so its callbacks
	// wait their turn here rather than reach the provider at any rate.
	exchanges *rate.Limiter
	// starts bounds the sign-ins each client address starts, and
	// addrExchanges the callbacks of each that take a turn in exchanges,
	// before it waits: one address cannot collect flow cookies by the
	// hundred, nor spend everyone's turns at the token endpoint.
	starts        *FailureLimiter
	addrExchanges *FailureLimiter
}

// NewSSO returns the single sign-on of cfg, its flow cookies MACed with
// the key keys gives; nothing is fetched until LoadFlowKey, Run or the
// first sign-in. A nil keys is a random key of this SSO's own, at once
// (a single process, the tests): no other process accepts its cookies.
func NewSSO(cfg SSOConfig, keys FlowKeySource, log *slog.Logger) *SSO {
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = RolesClaimDefault
	}
	if cfg.MaxSession <= 0 {
		cfg.MaxSession = MaxSessionDefault
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "email", "profile"}
	}
	s := &SSO{cfg: cfg, log: log, client: outbound.Client(outbound.Options{Timeout: ssoHTTPTimeout}), keys: keys,
		exchanges:     rate.NewLimiter(ssoExchangeRate, ssoExchangeBurst),
		starts:        &FailureLimiter{Every: ssoStartEvery, Burst: ssoStartBurst},
		addrExchanges: &FailureLimiter{Every: ssoAddrExchangeEvery, Burst: ssoAddrExchangeBurst}}
	if keys == nil {
		key := make([]byte, minFlowKeyBytes)
		_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
		s.flowKey.Store(&key)
	}
	return s
}

// LoadFlowKey reads the flow cookie's key, unless it is read already; an
// error (the database cannot be reached yet) leaves single sign-on
// unavailable (503) until a later call succeeds: Run calls it until then.
func (s *SSO) LoadFlowKey(ctx context.Context) error {
	if s.flowKey.Load() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ssoKeyTimeout)
	defer cancel()
	key, err := s.keys(ctx)
	if err != nil {
		return fmt.Errorf("reading single sign-on's flow cookie key: %w", err)
	}
	if len(key) < minFlowKeyBytes {
		return fmt.Errorf("single sign-on's flow cookie key holds %d bytes, want at least %d", len(key), minFlowKeyBytes)
	}
	key = slices.Clone(key)
	s.flowKey.CompareAndSwap(nil, &key)
	return nil
}

// key is the flow cookie's key, or nil while it is not read yet.
func (s *SSO) key() []byte {
	if k := s.flowKey.Load(); k != nil {
		return *k
	}
	return nil
}

// Only reports admin.oidc.only: no token form on the login page.
func (s *SSO) Only() bool { return s.cfg.Only }

// MaxSession is how long a single sign-on session lives.
func (s *SSO) MaxSession() time.Duration { return s.cfg.MaxSession }

// RolesClaim is the claim read for the role.
func (s *SSO) RolesClaim() string { return s.cfg.RolesClaim }
