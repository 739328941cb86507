package console_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/testenv"
)

// ssoBrowser is a browser at one client address, as the gateway sees it:
// its requests leave from a loopback address of its own (127.0.0.x), or,
// through a trusted proxy, carry the address in X-Forwarded-For.
type ssoBrowser struct {
	t         *testing.T
	client    *http.Client
	forwarded string
}

// browserFrom is a browser whose connections leave from localIP.
func browserFrom(t *testing.T, localIP, forwarded string) *ssoBrowser {
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(localIP)}, Timeout: 5 * time.Second}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &ssoBrowser{t: t, forwarded: forwarded, client: &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *ssoBrowser) get(rawURL string, flow *http.Cookie) (*http.Response, string) {
	b.t.Helper()
	resp, body, err := b.fetch(rawURL, flow)
	require.NoError(b.t, err)
	return resp, body
}

// fetch is get for other goroutines than the test's: an error instead of
// a failed test.
func (b *ssoBrowser) fetch(rawURL string, flow *http.Cookie) (*http.Response, string, error) {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, "", err
	}
	if b.forwarded != "" {
		req.Header.Set("X-Forwarded-For", b.forwarded)
	}
	if flow != nil {
		req.AddCookie(flow)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// ssoStart is a sign-in begun at a gateway: its flow cookie, the state
// the provider is sent, and the provider's authorization URL.
type ssoStart struct {
	flow    *http.Cookie
	state   string
	authURL string
}

// begin asks gateway base for a sign-in: the answer, and the start when
// it is the redirect to the provider.
func (b *ssoBrowser) begin(base string) (*http.Response, string, *ssoStart) {
	b.t.Helper()
	resp, body := b.get(base+"/admin/login/oidc", nil)
	if resp.StatusCode != http.StatusFound {
		return resp, body, nil
	}
	s := &ssoStart{authURL: resp.Header.Get("Location")}
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-callgate_oidc" {
			s.flow = c
		}
	}
	require.NotNil(b.t, s.flow)
	loc, err := url.Parse(s.authURL)
	require.NoError(b.t, err)
	s.state = loc.Query().Get("state")
	require.NotEmpty(b.t, s.state)
	return resp, body, s
}

// bogusURL is s's callback at gateway base with a code the provider
// never issued (one of its own: the provider counts distinct codes).
func bogusURL(base string, s *ssoStart) string {
	return base + "/admin/oidc/callback?" + url.Values{"code": {"bogus-" + s.state}, "state": {s.state}}.Encode()
}

// authorize signs s in at the provider (whoever it was told comes next)
// and returns the redirect back, with the code and state.
func authorize(t *testing.T, s *ssoStart) string {
	t.Helper()
	resp, err := testenv.NoFollow.Get(s.authURL + "&signed_in=1")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	return resp.Header.Get("Location")
}

// signIn is a whole sign-in at gateway base, as u: the callback's answer.
func (b *ssoBrowser) signIn(prov *testenv.OIDCProvider, base string, u testenv.OIDCUser) *http.Response {
	b.t.Helper()
	prov.Next(b.t, u)
	resp, body, s := b.begin(base)
	require.Equal(b.t, http.StatusFound, resp.StatusCode, body)
	back, _ := b.get(authorize(b.t, s), s.flow)
	return back
}

// collect begins n sign-ins at the gateways in turn: the ones started, and
// checks that each one refused says so with Retry-After.
func (b *ssoBrowser) collect(n int, bases ...string) []*ssoStart {
	b.t.Helper()
	var got []*ssoStart
	for i := range n {
		resp, body, s := b.begin(bases[i%len(bases)])
		if s != nil {
			got = append(got, s)
			continue
		}
		require.Equal(b.t, http.StatusTooManyRequests, resp.StatusCode, body)
		require.NotEmpty(b.t, resp.Header.Get("Retry-After"))
		require.Contains(b.t, body, "Too many sign-ins started from your address.")
	}
	return got
}

// flood sends every start's bogus callback to base, eight at a time,
// while person signs in there as u; it returns the callbacks' statuses,
// and person's answer and how long it took.
func flood(t *testing.T, prov *testenv.OIDCProvider, base string, attacker *ssoBrowser, starts []*ssoStart,
	person *ssoBrowser, u testenv.OIDCUser) (map[int]int, *http.Response, time.Duration) {
	t.Helper()
	statuses := map[int]int{}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	work := make(chan *ssoStart, len(starts))
	for _, s := range starts {
		work <- s
	}
	close(work)
	for range 8 {
		wg.Go(func() {
			for s := range work {
				resp, body, err := attacker.fetch(bogusURL(base, s), s.flow)
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case resp.StatusCode == http.StatusTooManyRequests &&
					(resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "Too many sign-ins are finishing from your address.")):
					errs = append(errs, fmt.Errorf("a 429 without Retry-After or its sentence: %s", body))
				default:
					statuses[resp.StatusCode]++
				}
				mu.Unlock()
			}
		})
	}
	began := time.Now()
	signedIn := person.signIn(prov, base, u)
	took := time.Since(began)
	wg.Wait()
	require.Empty(t, errs)
	return statuses, signedIn, took
}

// refill is how many turns an address regains in d (one per 3 s), plus
// one for the turn under way: the bounds the checks below allow for.
func refill(d time.Duration) int { return int(d/(3*time.Second)) + 1 }

// TestSSOBogusFlowsHoldNoSignInShut (issue 39): one address starts sign-ins
// by the hundred at two gateways of a fleet and sends each back with a code
// the provider never issued, while a person at another address signs in.
// Each gateway starts 20 for the address, then answers 429 with
// Retry-After; of the 40 flows collected, 20 reach the provider's token
// endpoint and the rest are refused at once (429: the address's own turns
// are spent), so everyone's turns are never used up: the person signs in,
// neither refused nor told single sign-on is busy. The address then starts
// no more sign-ins (its refused codes count), the person still does. A
// sign-in started at one gateway finishes at the other: the flow cookie's
// key is the deployment's, in the database.
func TestSSOBogusFlowsHoldNoSignInShut(t *testing.T) {
	t.Parallel()
	prov := testenv.StartOIDCProvider(t)
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base1, base2 := "http://"+ln1.Addr().String(), "http://"+ln2.Addr().String()
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + operatorToken
		c.Admin.OIDC = config.OIDC{Issuer: prov.Issuer, ClientID: prov.ClientID, ClientSecret: prov.ClientSecret,
			RedirectURL: base1 + "/admin/oidc/callback", Operators: []string{operatorsGroup}}
	})
	testenv.StartGatewayOn(t, cfg, ln1, "http").WaitReady(t)
	testenv.StartGatewayOn(t, cfg, ln2, "http").WaitReady(t)
	attacker := browserFrom(t, "127.0.0.2", "")
	person := browserFrom(t, "127.0.0.3", "")
	otto := testenv.OIDCUser{Subject: "u-otto", Email: "otto@example.com", Groups: []string{operatorsGroup}}

	// Started at the second gateway, back at the first (the redirect URL's).
	back := person.signIn(prov, base2, otto)
	require.Equal(t, http.StatusOK, back.StatusCode)
	require.NotNil(t, sessionCookieOf(t, back))

	began := time.Now()
	starts := attacker.collect(200, base1, base2)
	slack := 2 * refill(time.Since(began))
	require.GreaterOrEqual(t, len(starts), 2*20, "each gateway starts 20")
	require.LessOrEqual(t, len(starts), 2*20+slack, "then one per 3 s")

	exchanges := prov.Exchanges(t)
	began = time.Now()
	statuses, signedIn, took := flood(t, prov, base1, attacker, starts, person, otto)
	t.Logf("the person's sign-in took %v during the flood; the flood's answers %v", took, statuses)
	require.Equal(t, http.StatusOK, signedIn.StatusCode, "the person signs in during the flood")
	require.NotNil(t, sessionCookieOf(t, signedIn))
	refused := statuses[http.StatusBadGateway]
	require.Equal(t, len(starts), refused+statuses[http.StatusTooManyRequests], "every bogus callback: refused by the provider, or kept from it: %v", statuses)
	require.LessOrEqual(t, refused, 20+refill(time.Since(began)), "the address's own turns at the token endpoint")
	require.Equal(t, refused+1, prov.Exchanges(t)-exchanges, "only those and the person's reached the token endpoint")

	resp, body, _ := attacker.begin(base1)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, body, "Too many failed sign-ins from your address.")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	resp, body, _ = person.begin(base1)
	require.Equal(t, http.StatusFound, resp.StatusCode, body)
}

// TestSSOBogusFlowsBehindATrustedProxy: the same behind a proxy listed in
// admin.trusted_proxies, every request from its address, each person
// named by X-Forwarded-For: the bogus flows of one forwarded client spend
// its own budgets only, and another's sign-in goes through. A flow is
// bound to the client that started it: its callback, with the provider's
// genuine code, from another forwarded client (a flow cookie collected in
// one place and spent in another, or a stolen one) is a 400 that never
// reaches the provider (the code still works for its owner afterwards)
// and counts for nothing against the sender, however often.
func TestSSOBogusFlowsBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	prov := testenv.StartOIDCProvider(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + operatorToken
		c.Admin.TrustedProxies = []string{"127.0.0.1"}
		c.Admin.OIDC = config.OIDC{Issuer: prov.Issuer, ClientID: prov.ClientID, ClientSecret: prov.ClientSecret,
			RedirectURL: base + "/admin/oidc/callback", Operators: []string{operatorsGroup}}
	})
	testenv.StartGatewayOn(t, cfg, ln, "http").WaitReady(t)
	attacker := browserFrom(t, "127.0.0.1", "198.51.100.7")
	person := browserFrom(t, "127.0.0.1", "198.51.100.8")
	bystander := browserFrom(t, "127.0.0.1", "198.51.100.9")
	otto := testenv.OIDCUser{Subject: "u-otto", Email: "otto@example.com", Groups: []string{operatorsGroup}}

	began := time.Now()
	starts := attacker.collect(200, base)
	require.GreaterOrEqual(t, len(starts), 20)
	require.LessOrEqual(t, len(starts), 20+refill(time.Since(began)))
	exchanges := prov.Exchanges(t)
	statuses, signedIn, took := flood(t, prov, base, attacker, starts, person, otto)
	t.Logf("the person's sign-in took %v during the flood; the flood's answers %v", took, statuses)
	require.Equal(t, http.StatusOK, signedIn.StatusCode, "another forwarded client signs in during the flood")
	require.NotNil(t, sessionCookieOf(t, signedIn))
	// Collected at one gateway, the flows are as many as the client's own
	// turns at the token endpoint, give or take a turn regained meanwhile.
	refused := statuses[http.StatusBadGateway]
	require.Equal(t, len(starts), refused+statuses[http.StatusTooManyRequests], "%v", statuses)
	require.GreaterOrEqual(t, refused, 20, "the provider refused them: %v", statuses)
	require.Equal(t, refused+1, prov.Exchanges(t)-exchanges)
	resp, body, _ := attacker.begin(base)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, body, "Too many failed sign-ins from your address.")
	resp, body, _ = person.begin(base)
	require.Equal(t, http.StatusFound, resp.StatusCode, body)

	// The person's sign-in, back from the provider with a genuine code,
	// sent by someone else: refused, again and again, before the provider.
	prov.Next(t, otto)
	_, _, s := person.begin(base)
	require.NotNil(t, s)
	genuine := authorize(t, s)
	exchanges = prov.Exchanges(t)
	for range 15 {
		resp, body := bystander.get(genuine, s.flow)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body, "started from another network address")
		require.Empty(t, cookieNamed(resp, "__Host-callgate_admin"), "no session")
	}
	require.Equal(t, exchanges, prov.Exchanges(t), "none reached the token endpoint")
	resp, body, _ = bystander.begin(base)
	require.Equal(t, http.StatusFound, resp.StatusCode, "fifteen of them counted nothing against the sender: %s", body)
	resp, _ = person.get(genuine, s.flow)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the flow and its code are still the person's")
	require.NotNil(t, sessionCookieOf(t, resp))
}

// cookieNamed is the value of resp's cookie name, "" if it set none.
func cookieNamed(resp *http.Response, name string) string {
	for _, c := range resp.Cookies() {
		if c.Name == name && c.Value != "" {
			return c.Value
		}
	}
	return ""
}
