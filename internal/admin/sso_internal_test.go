package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"context"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

func testSSO() *SSO {
	return NewSSO(SSOConfig{Issuer: "https://idp.example.com", ClientID: "callgate", ClientSecret: "client-secret-0123456789",
		RedirectURL: "https://callgate.example.com/admin/oidc/callback", Operators: []string{"ops"}, Viewers: []string{"staff"}},
		nil, slog.New(slog.DiscardHandler))
}

// FuzzParseCallback: whatever query the provider's redirect (or anyone
// pretending to be it) carries, the parser does not panic, and accepts it
// only with exactly one non-empty, bounded code and state, returned as
// they were sent; anything else is an *SSOError with a 4xx status and a
// message that is valid UTF-8 of bounded length.
func FuzzParseCallback(f *testing.F) {
	for _, seed := range []string{
		"code=abc&state=xyz",
		"code=abc&state=xyz&iss=https%3A%2F%2Fidp.example.com",
		"error=access_denied&error_description=The+user+said+no&state=xyz",
		"code=a&code=b&state=xyz",
		"code=&state=",
		"state=xyz",
		"error=&code=abc&state=xyz",
		"code=%ff%fe&state=%00",
		"code=abc;state=xyz",
		strings.Repeat("code=x&", 100) + "state=y",
		"error=" + strings.Repeat("%e2%82%ac", 200),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw) // what gin hands over: the pairs it could read
		code, state, err := parseCallback(q)
		if err == nil {
			require.Len(t, q["code"], 1)
			require.Len(t, q["state"], 1)
			require.Equal(t, q.Get("code"), code)
			require.Equal(t, q.Get("state"), state)
			require.NotEmpty(t, code)
			require.NotEmpty(t, state)
			require.LessOrEqual(t, len(code), maxCallbackParam)
			require.LessOrEqual(t, len(state), maxCallbackParam)
			require.False(t, q.Has("error"))
			return
		}
		var se *SSOError
		require.True(t, errors.As(err, &se), "%T", err)
		require.GreaterOrEqual(t, se.Status, 400)
		require.Less(t, se.Status, 500)
		require.True(t, utf8Valid(se.Msg))
		require.LessOrEqual(t, len(se.Msg), 600)
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// FuzzDecodeFlow: a flow cookie is accepted only as callgate made it (its
// MAC holds) and before it expires; no other value is, and none panics.
func FuzzDecodeFlow(f *testing.F) {
	s := testSSO()
	now := time.Now()
	good := s.encodeFlow(ssoFlow{State: "st", Nonce: "no", Verifier: "ve", Next: "/admin/", Expires: now.Add(time.Minute).Unix()})
	f.Add(good)
	f.Add(good + "x")
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Add("e30.")
	f.Add(".")
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := s.decodeFlow(v, now)
		if v == good {
			require.True(t, ok)
			require.Equal(t, "st", got.State)
			return
		}
		if ok {
			// Another encoding of the same payload and MAC is the only way
			// in (base64 without padding has one form per byte string,
			// except for trailing bits, which Strict would refuse).
			payload, _, _ := strings.Cut(v, ".")
			require.Equal(t, strings.Split(good, ".")[0], payload)
		}
	})
}

// TestDecodeFlowRefuses: a changed payload, another key and an expired
// flow are refused.
func TestDecodeFlowRefuses(t *testing.T) {
	s := testSSO()
	now := time.Now()
	f := ssoFlow{State: "st", Nonce: "no", Verifier: "ve", Next: "/admin/", Expires: now.Add(time.Minute).Unix()}
	v := s.encodeFlow(f)
	_, ok := s.decodeFlow(v, now)
	require.True(t, ok)
	_, ok = s.decodeFlow(v, now.Add(2*time.Minute))
	require.False(t, ok, "expired")
	other := NewSSO(SSOConfig{Issuer: "https://idp.example.com", ClientID: "callgate", ClientSecret: "another-secret-0123456789"}, nil, slog.New(slog.DiscardHandler))
	_, ok = other.decodeFlow(v, now)
	require.False(t, ok, "MACed with another key (each SSO without a key source draws its own)")
	f.State = "attacker"
	forged := other.encodeFlow(f)
	_, ok = s.decodeFlow(forged, now)
	require.False(t, ok, "forged")
}

// TestIdentifyRoles: operator wins over viewer, a dotted claim path and a
// single-string claim work, an unverified e-mail used as the roles claim
// grants nothing, and the 403 names the claim and its values.
func TestIdentifyRoles(t *testing.T) {
	s := testSSO()
	who, err := s.identify("sub-1", map[string]any{"email": "a@example.com", "email_verified": true, "groups": []any{"staff", "ops"}})
	require.NoError(t, err)
	require.Equal(t, Identity{Kind: KindSSO, Actor: "a@example.com", Role: RoleOperator, Subject: "sub-1", Email: "a@example.com"}, who)
	// An address the provider did not verify does not name anyone in the
	// audit, nor does a name or user name the person chose (two people
	// may share one): the issuer's subject does.
	for _, claims := range []map[string]any{
		{"email": "a@example.com", "email_verified": "false"},
		{"email": "a@example.com", "preferred_username": "ann"},
		{"email": "a@example.com", "email_verified": false, "name": "Ann Example"},
		{"name": "Bob Smith"},
		// A verified "email" that is not an address could be a token's
		// name (which never holds an @): the subject.
		{"email": "ops-bot", "email_verified": true},
	} {
		claims["groups"] = []any{"ops"}
		who, err := s.identify("sub-1", claims)
		require.NoError(t, err)
		require.Equal(t, "sso:sub-1", who.Actor, "%v", claims)
	}
	bob1, err := s.identify("sub-bob-1", map[string]any{"name": "Bob Smith", "groups": []any{"ops"}})
	require.NoError(t, err)
	bob2, err := s.identify("sub-bob-2", map[string]any{"name": "Bob Smith", "groups": []any{"ops"}})
	require.NoError(t, err)
	require.NotEqual(t, bob1.Actor, bob2.Actor, "two people named Bob Smith are two actors")
	require.Equal(t, "Bob Smith", bob1.Name, "the name stays for the page")
	who, err = s.identify("sub-2", map[string]any{"preferred_username": "bee", "groups": "staff"})
	require.NoError(t, err)
	require.Equal(t, RoleViewer, who.Role)
	require.Equal(t, "sso:sub-2", who.Actor, "marked: it cannot pass for a token's name")
	who, err = s.identify("sub-3", map[string]any{"groups": []any{"sales", 7}})
	var noRole *NoRoleError
	require.ErrorAs(t, err, &noRole)
	require.Equal(t, &NoRoleError{Actor: "sso:sub-3", Claim: "groups", Values: []string{"sales"}}, noRole)
	require.Empty(t, who.Role)

	nested := NewSSO(SSOConfig{RolesClaim: "realm_access.roles", Operators: []string{"ops"}}, nil, slog.New(slog.DiscardHandler))
	who, err = nested.identify("sub-4", map[string]any{"realm_access": map[string]any{"roles": []any{"ops"}}})
	require.NoError(t, err)
	require.Equal(t, RoleOperator, who.Role)

	urlClaim := NewSSO(SSOConfig{RolesClaim: "https://example.com/roles", Operators: []string{"ops"}}, nil, slog.New(slog.DiscardHandler))
	who, err = urlClaim.identify("sub-4", map[string]any{"https://example.com/roles": []any{"ops"}})
	require.NoError(t, err, "a claim name with dots of its own")
	require.Equal(t, RoleOperator, who.Role)

	byEmail := NewSSO(SSOConfig{RolesClaim: "email", Viewers: []string{"v@example.com"}}, nil, slog.New(slog.DiscardHandler))
	for _, unverified := range []map[string]any{
		{"email": "v@example.com", "email_verified": false},
		{"email": "v@example.com", "email_verified": "false"},
		{"email": "v@example.com"},
	} {
		_, err = byEmail.identify("sub-5", unverified)
		require.ErrorAs(t, err, &noRole, "an unverified address grants nothing: %v", unverified)
	}
	who, err = byEmail.identify("sub-5", map[string]any{"email": "v@example.com", "email_verified": true})
	require.NoError(t, err)
	require.Equal(t, RoleViewer, who.Role)
}

// TestParseCallbackProviderError: the page says a fixed sentence per
// error code, never the provider's error_description, which anyone can
// put in a link; the description goes to the log (the error's cause),
// clipped.
func TestParseCallbackProviderError(t *testing.T) {
	const phish = "Your session expired: re-authenticate at https://evil.example/login"
	for code, want := range map[string]string{
		"access_denied":                           "The sign-in was cancelled or refused at the identity provider.",
		"login_required":                          "The identity provider needs you to sign in there first; start again from the login page.",
		"temporarily_unavailable":                 "The identity provider could not complete the sign-in now; try again shortly.",
		"invalid_scope":                           "The identity provider refused callgate's sign-in request; an administrator should check the client's settings there (the log says more).",
		"re-authenticate at https://evil.example": "The identity provider refused the sign-in; start again from the login page (the log says more).",
	} {
		_, _, err := parseCallback(url.Values{"error": {code}, "error_description": {phish}, "state": {"s"}})
		var se *SSOError
		require.ErrorAs(t, err, &se)
		require.Equal(t, http.StatusUnauthorized, se.Status)
		require.Equal(t, want, se.Msg, code)
		require.NotContains(t, se.Msg, "evil.example")
		require.ErrorContains(t, se.Err, phish, "the description is logged")
		require.False(t, se.Suspect)
	}
	_, _, err := parseCallback(url.Values{"error": {"access_denied"}, "error_description": {strings.Repeat("é", 400)}})
	var se *SSOError
	require.ErrorAs(t, err, &se)
	require.LessOrEqual(t, len(se.Err.Error()), 800)
}

// TestIdentifyNeedsASubject: an ID token without sub opens no session
// (an identity without one could otherwise pass for a token's).
func TestIdentifyNeedsASubject(t *testing.T) {
	_, err := testSSO().identify("", map[string]any{"email": "a@example.com", "email_verified": true, "groups": []any{"ops"}})
	var se *SSOError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusBadGateway, se.Status)
}

// TestDiscoveryAttemptsAreBounded: while the provider fails, a crowd of
// unauthenticated sign-in starts makes one discovery call, not one each,
// and every one of them gets the outage as its answer.
func TestDiscoveryAttemptsAreBounded(t *testing.T) {
	var calls atomic.Int32
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		time.Sleep(50 * time.Millisecond)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer idp.Close()
	s := NewSSO(SSOConfig{Issuer: idp.URL, ClientID: "callgate", ClientSecret: "client-secret-0123456789",
		RedirectURL: "https://cg.example.com/admin/oidc/callback", Viewers: []string{"v"}}, nil, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			_, _, err := s.Begin(t.Context(), "/admin/", fmt.Sprintf("192.0.2.%d", i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, ErrSSOUnavailable)
	}
	require.Equal(t, int32(1), calls.Load())
}

// TestSpentFlowsArePruned: the states of spent flows are kept until they
// expire and no longer: a stream of sign-ins cannot grow the set, and a
// state is refused twice only while its flow could still be presented.
func TestSpentFlowsArePruned(t *testing.T) {
	t.Parallel()
	s := &SSO{}
	t0 := time.Unix(1_000_000, 0)
	for i := range 10_000 {
		now := t0.Add(time.Duration(i) * time.Second)
		f := ssoFlow{State: fmt.Sprintf("s%d", i), Expires: now.Add(SSOFlowMaxAge).Unix()}
		require.True(t, s.spend(f, now))
		require.False(t, s.spend(f, now), "spent once")
	}
	require.LessOrEqual(t, len(s.spent), int(SSOFlowMaxAge/time.Second)+1, "only unexpired states are kept")
	require.Len(t, s.spentOrder, len(s.spent))
}

// TestTokenEndpointCallsAreBounded: flow cookies are cheap to start, so
// their callbacks take turns for the provider's token endpoint (all
// clients together, after their address's own turn): past the bound a callback is told single sign-on is
// busy (503, not a suspect sign-in), and its flow is not spent.
func TestTokenEndpointCallsAreBounded(t *testing.T) {
	t.Parallel()
	s := testSSO()
	s.exchanges = rate.NewLimiter(rate.Every(time.Hour), 1)
	require.True(t, s.exchanges.Allow(), "the one turn is taken")
	f := ssoFlow{State: "state-1", Nonce: "n", Verifier: "v", Expires: time.Now().Add(time.Minute).Unix(), Client: s.clientDigest("192.0.2.1")}
	start := time.Now()
	_, err := s.Complete(context.Background(), url.Values{"code": {"c"}, "state": {f.State}}, s.encodeFlow(f), "192.0.2.1")
	var se *SSOError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusServiceUnavailable, se.Status, "%v", err)
	require.False(t, SuspectSignIn(err))
	require.Less(t, time.Since(start), ssoExchangeWait+time.Second, "waits at most ssoExchangeWait")
	require.True(t, s.spend(f, time.Now()), "not spent by a callback that never reached the provider")
}
