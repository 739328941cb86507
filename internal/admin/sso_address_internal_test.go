package admin

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFlowKeyIsNotTheClientSecrets: the flow cookie's key is no longer
// derived from the client secret (which let anyone who collected cookies
// test guesses of the secret offline): a cookie MACed with the key the
// secret used to give is refused, and two SSOs with the same secret but
// their own keys refuse each other's cookies.
func TestFlowKeyIsNotTheClientSecrets(t *testing.T) {
	t.Parallel()
	s := testSSO()
	// What NewSSO derived before the key came from the database.
	m := hmac.New(sha256.New, []byte(s.cfg.ClientSecret))
	m.Write([]byte("callgate-oidc-flow\x00" + s.cfg.Issuer + "\x00" + s.cfg.ClientID))
	secretKey := m.Sum(nil)
	require.NotEqual(t, secretKey, s.key())

	old := testSSO()
	old.flowKey.Store(&secretKey)
	minted := MintFlow(old, "st", "192.0.2.1")
	require.True(t, FlowHolds(old, minted))
	require.False(t, FlowHolds(s, minted), "a cookie MACed with the client secret's key")
	_, err := s.Complete(context.Background(), url.Values{"code": {"bogus"}, "state": {"st"}}, minted, "192.0.2.1")
	require.ErrorIs(t, err, errBadState)
	require.False(t, SuspectSignIn(err))

	require.False(t, FlowHolds(testSSO(), MintFlow(s, "st", "192.0.2.1")), "same secret, another key")

	// A key source: every SSO reading the same key accepts the others'.
	shared := []byte("0123456789abcdef0123456789abcdef")
	source := func(context.Context) ([]byte, error) { return shared, nil }
	a, b := NewSSO(s.cfg, source, s.log), NewSSO(s.cfg, source, s.log)
	require.False(t, FlowHolds(a, MintFlow(s, "st", "192.0.2.1")), "no key read yet: nothing holds")
	_, _, err = a.Begin(context.Background(), "/admin/", "192.0.2.1")
	require.ErrorIs(t, err, errNoFlowKey, "no sign-in starts before the key is read")
	require.NoError(t, a.LoadFlowKey(context.Background()))
	require.NoError(t, b.LoadFlowKey(context.Background()))
	require.True(t, FlowHolds(b, MintFlow(a, "st", "192.0.2.1")))
	short := NewSSO(s.cfg, func(context.Context) ([]byte, error) { return []byte("short"), nil }, s.log)
	require.ErrorContains(t, short.LoadFlowKey(context.Background()), "want at least 32")
}

// TestCallbackFromAnotherAddress: a flow cookie is bound to the address
// that started it; its callback from another address is a 400 that is not
// a suspect sign-in (the failure limiter does not count it), takes no turn
// of either address nor of everyone's, never reaches the provider (the
// issuer here cannot be reached: a call would be a 503), and leaves the
// flow unspent for its own address.
func TestCallbackFromAnotherAddress(t *testing.T) {
	t.Parallel()
	s := testSSO()
	v := MintFlow(s, "st-1", "192.0.2.1")
	q := url.Values{"code": {"bogus"}, "state": {"st-1"}}
	for range 3 * ssoAddrExchangeBurst {
		_, err := s.Complete(context.Background(), q, v, "198.51.100.9")
		var se *SSOError
		require.ErrorAs(t, err, &se)
		require.Same(t, errOtherAddress, se)
		require.Equal(t, http.StatusBadRequest, se.Status)
		require.False(t, SuspectSignIn(err))
	}
	for _, addr := range []string{"192.0.2.1", "198.51.100.9"} {
		ok, _ := s.addrExchanges.Take(addr)
		require.True(t, ok, "%s has its turns", addr)
	}
	require.InDelta(t, float64(ssoExchangeBurst), s.exchanges.Tokens(), 1, "everyone's turns untouched")
	require.True(t, s.spend(ssoFlow{State: "st-1", Expires: time.Now().Add(time.Minute).Unix()}, time.Now()), "not spent")
}

// TestAddressTurnsBoundStartsAndExchanges: an address starts
// ssoStartBurst sign-ins, then is told to wait (429 with RetryAfter)
// before anything is asked of the provider, while another address starts
// its own; an address whose own turns at the token endpoint are spent is
// refused at once (429, not a suspect sign-in, no wait on everyone's
// turns, which it leaves untouched), and its flow is not spent.
func TestAddressTurnsBoundStartsAndExchanges(t *testing.T) {
	t.Parallel()
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer idp.Close()
	cfg := testSSO().cfg
	cfg.Issuer = idp.URL
	s := NewSSO(cfg, nil, slog.New(slog.DiscardHandler))
	// The issuer fails: a start that gets past its address's turns fails
	// discovery (asked at most once per ssoRediscoverEvery).
	for i := range ssoStartBurst {
		_, _, err := s.Begin(context.Background(), "/admin/", "192.0.2.1")
		require.ErrorIs(t, err, ErrSSOUnavailable, "start %d", i)
	}
	_, _, err := s.Begin(context.Background(), "/admin/", "192.0.2.1")
	var se *SSOError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusTooManyRequests, se.Status)
	require.Greater(t, se.RetryAfter, time.Duration(0))
	require.LessOrEqual(t, se.RetryAfter, ssoStartEvery)
	require.Contains(t, se.Msg, "Too many sign-ins started from your address.")
	_, _, err = s.Begin(context.Background(), "/admin/", "192.0.2.2")
	require.ErrorIs(t, err, ErrSSOUnavailable, "another address starts its own")

	for range ssoAddrExchangeBurst {
		ok, _ := s.addrExchanges.Take("192.0.2.1")
		require.True(t, ok)
	}
	v := MintFlow(s, "st-2", "192.0.2.1")
	start := time.Now()
	_, err = s.Complete(context.Background(), url.Values{"code": {"bogus"}, "state": {"st-2"}}, v, "192.0.2.1")
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusTooManyRequests, se.Status, "%v", err)
	require.Greater(t, se.RetryAfter, time.Duration(0))
	require.Contains(t, se.Msg, "Too many sign-ins are finishing from your address.")
	require.False(t, SuspectSignIn(err))
	require.Less(t, time.Since(start), ssoExchangeWait, "refused without waiting for everyone's turns (up to ssoExchangeWait)")
	require.InDelta(t, float64(ssoExchangeBurst), s.exchanges.Tokens(), 1, "everyone's turns untouched")
	require.True(t, s.spend(ssoFlow{State: "st-2", Expires: time.Now().Add(time.Minute).Unix()}, time.Now()), "not spent")
}

// TestFlowKeyReadAgainUntilTheDatabaseAnswers: a gateway whose database
// cannot be reached when it starts comes up all the same; until the flow
// cookie's key is read, sign-ins neither start nor finish (503, nothing
// asked of the provider), and Run reads it again until it can.
func TestFlowKeyReadAgainUntilTheDatabaseAnswers(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	source := func(context.Context) ([]byte, error) {
		if reads.Add(1) == 1 {
			return nil, errors.New("dial tcp 127.0.0.1:3306: connect: connection refused")
		}
		return []byte("0123456789abcdef0123456789abcdef"), nil
	}
	s := NewSSO(testSSO().cfg, source, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, s.LoadFlowKey(context.Background()), "connection refused")
	_, _, err := s.Begin(context.Background(), "/admin/", "192.0.2.1")
	require.ErrorIs(t, err, errNoFlowKey)
	require.Equal(t, http.StatusServiceUnavailable, errNoFlowKey.Status)
	_, err = s.Complete(context.Background(), url.Values{"code": {"c"}, "state": {"s"}}, "x.y", "192.0.2.1")
	require.ErrorIs(t, err, errNoFlowKey)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return s.key() != nil }, 10*time.Second, 20*time.Millisecond, "Run read the key")
	cancel()
	<-done
	require.Equal(t, int32(2), reads.Load())
}

// TestSpentFlowSentBackTakesNoTurn: a flow cookie already spent, sent back
// again and again from its own address, is refused as a bad state before
// it takes a turn: the address keeps its own turns at the token endpoint
// and everyone's are untouched (before, each resend took one of each).
func TestSpentFlowSentBackTakesNoTurn(t *testing.T) {
	t.Parallel()
	s := testSSO()
	v := MintFlow(s, "st-3", "192.0.2.1")
	f, ok := s.decodeFlow(v, time.Now())
	require.True(t, ok)
	require.True(t, s.spend(f, time.Now()))
	for range 3 * ssoAddrExchangeBurst {
		_, err := s.Complete(context.Background(), url.Values{"code": {"bogus"}, "state": {"st-3"}}, v, "192.0.2.1")
		require.ErrorIs(t, err, errBadState)
		require.False(t, SuspectSignIn(err))
	}
	require.InDelta(t, float64(ssoExchangeBurst), s.exchanges.Tokens(), 1, "everyone's turns untouched")
	for i := range ssoAddrExchangeBurst {
		ok, _ := s.addrExchanges.Take("192.0.2.1")
		require.True(t, ok, "the address's turn %d is still there", i)
	}
}

// TestIPv6AddressesShareTheirSlash64: the per-address turns of single
// sign-on count an IPv6 /64 as one address (a host has 2^64 of them to
// choose from): starts from ever new addresses of one /64 are refused
// after the address's burst, while another /64 and IPv4 addresses start
// their own.
func TestIPv6AddressesShareTheirSlash64(t *testing.T) {
	t.Parallel()
	require.Equal(t, "2001:db8:1:2::/64", limitKey("2001:db8:1:2:aaaa::1"))
	require.Equal(t, "192.0.2.7", limitKey("192.0.2.7"))
	require.Equal(t, "192.0.2.7", limitKey("::ffff:192.0.2.7"))
	s := testSSO()
	for i := range ssoAddrExchangeBurst {
		ok, _ := s.addrExchanges.Take(limitKey(fmt.Sprintf("2001:db8:1:2::%x", i+1)))
		require.True(t, ok, "turn %d", i)
	}
	v := MintFlow(s, "st-6", "2001:db8:1:2::ffff")
	_, err := s.Complete(context.Background(), url.Values{"code": {"bogus"}, "state": {"st-6"}}, v, "2001:db8:1:2::ffff")
	var se *SSOError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusTooManyRequests, se.Status, "a fresh address of the same /64: %v", err)
	ok, _ := s.addrExchanges.Take(limitKey("2001:db8:1:3::1"))
	require.True(t, ok, "another /64 has its own turns")
}
