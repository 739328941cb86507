package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/signature"
	"callgate/internal/source"
	"callgate/internal/testenv"
)

const hmacSecret = "strict-source-secret"

// hostileSources adds sources that exercise each defence.
func hostileSources(c *config.Config) {
	c.Admin.Token = "ops:ops-token-0123456789"
	hmacSig := source.Signature{Scheme: "hmac-sha256", Header: "X-Signature", Encoding: "hex", Secrets: []string{hmacSecret}}
	base := source.Config{Kind: "payment", EventID: source.EventID{Fields: []string{"paymentNo"}}, BusinessKey: "orderCode"}
	strict := base
	strict.Name, strict.Signature, strict.ContentTypes, strict.MaxBodyBytes = "strict", hmacSig, []string{"application/json"}, 512
	walled := base
	walled.Name, walled.Signature, walled.AllowIPs = "walled", hmacSig, []string{"192.0.2.0/24"}
	limited := base
	limited.Name, limited.Signature, limited.RateLimit = "limited", hmacSig, source.RateLimit{Rate: 0.001, Burst: 1}
	stripe := base
	stripe.Name, stripe.Signature = "stripedemo", source.Signature{Scheme: "stripe", Secrets: []string{"whsec_stripe_test_secret"}}
	for _, s := range []source.Config{strict, walled, limited, stripe} {
		c.Sources = append(c.Sources, s.WithDefaults())
	}
}

func signHMAC(body string) string { return signature.SignHMAC(hmacSecret, []byte(body), "hex", "") }

// TestHostileInputIsRefusedCheaplyAndClearly sends malformed and hostile
// requests to a running gateway and checks for each the exact status, a
// JSON error with a reason, no row, no message, and a healthy gateway.
func TestHostileInputIsRefusedCheaplyAndClearly(t *testing.T) {
	t.Parallel()
	b := setup(t, hostileSources)
	cfg := b.cfg
	now := time.Now()
	valid := `{"orderCode":"O-1","paymentNo":"P-1","amount":1,"status":"SUCCESS"}`
	pay := func(body string, ts time.Time) http.Header {
		return testenv.PaydemoHeaders(t, cfg, "msg_h", ts, []byte(body))
	}
	payWith := func(body string, mutate func(h http.Header)) http.Header {
		h := pay(body, now)
		mutate(h)
		return h
	}
	strictH := func(body string) http.Header {
		return http.Header{"Content-Type": {"application/json"}, "X-Signature": {signHMAC(body)}}
	}
	stripeH := func(body string, ts time.Time) http.Header {
		return http.Header{"Stripe-Signature": {signature.SignStripe("whsec_stripe_test_secret", ts, []byte(body))}}
	}
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	wrapDeep := `{"orderCode":"O","paymentNo":"P","x":` + deep + `}`
	otherSig, err := signature.SignStandardWebhooks("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_h", now, []byte(valid))
	require.NoError(t, err)

	type tc struct {
		name   string
		method string
		path   string
		header http.Header
		body   string
		status int
		reason string
	}
	cases := []tc{
		// Standard Webhooks
		{"sw: no headers", "POST", "/callbacks/paydemo", nil, valid, 401, "missing"},
		{"sw: no signature", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Del("webhook-signature") }), valid, 401, "webhook-signature"},
		{"sw: no timestamp", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Del("webhook-timestamp") }), valid, 401, "timestamp"},
		{"sw: no id", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Del("webhook-id") }), valid, 401, "webhook-id"},
		{"sw: signature of another secret", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Set("webhook-signature", otherSig) }), valid, 401, "no signature matched"},
		{"sw: garbage signature", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Set("webhook-signature", "v1,!!!notbase64!!!") }), valid, 401, "signature"},
		{"sw: unknown version only", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Set("webhook-signature", "v2,abc=") }), valid, 401, "signature"},
		{"sw: expired timestamp (replay)", "POST", "/callbacks/paydemo", pay(valid, now.Add(-10*time.Minute)), valid, 401, "tolerance"},
		{"sw: future timestamp", "POST", "/callbacks/paydemo", pay(valid, now.Add(10*time.Minute)), valid, 401, "tolerance"},
		{"sw: non-numeric timestamp", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Set("webhook-timestamp", "yesterday") }), valid, 401, "timestamp"},
		{"sw: signed id differs", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Set("webhook-id", "msg_other") }), valid, 401, "no signature matched"},
		{"sw: body changed after signing", "POST", "/callbacks/paydemo", pay(valid, now), strings.Replace(valid, `"amount":1`, `"amount":100`, 1), 401, "no signature matched"},
		{"sw: truncated body", "POST", "/callbacks/paydemo", pay(valid, now), valid[:len(valid)-10], 401, "no signature matched"},
		// HMAC
		{"hmac: missing header", "POST", "/callbacks/shipdemo", nil, valid, 401, "X-Signature"},
		{"hmac: not hex", "POST", "/callbacks/shipdemo", http.Header{"X-Signature": {"zz" + strings.Repeat("0", 62)}}, valid, 401, "signature"},
		{"hmac: wrong length", "POST", "/callbacks/shipdemo", http.Header{"X-Signature": {"abcd"}}, valid, 401, "signature"},
		{"hmac: wrong secret", "POST", "/callbacks/shipdemo", http.Header{"X-Signature": {signHMAC(valid)}}, valid, 401, "no signature matched"},
		// Stripe
		{"stripe: missing header", "POST", "/callbacks/stripedemo", nil, valid, 401, "Stripe-Signature"},
		{"stripe: malformed header", "POST", "/callbacks/stripedemo", http.Header{"Stripe-Signature": {"garbage"}}, valid, 401, "signature"},
		{"stripe: expired", "POST", "/callbacks/stripedemo", stripeH(valid, now.Add(-time.Hour)), valid, 401, "tolerance"},
		{"stripe: wrong body", "POST", "/callbacks/stripedemo", stripeH(valid, now), valid + " ", 401, "no signature matched"},
		// Routing, methods, sources
		{"unknown source", "POST", "/callbacks/nosuch", nil, valid, 404, "unknown source"},
		{"source name with traversal", "POST", "/callbacks/..%2Fadmin", nil, valid, 404, ""},
		{"GET on intake", "GET", "/callbacks/paydemo", nil, "", 405, "method not allowed"},
		{"PUT on intake", "PUT", "/callbacks/paydemo", pay(valid, now), valid, 405, "method not allowed"},
		{"no such path", "POST", "/callback/paydemo", nil, valid, 404, "not found"},
		// Allow-list, rate limit, content type, size
		{"ip not allowed", "POST", "/callbacks/walled", http.Header{"X-Signature": {signHMAC(valid)}, "X-Forwarded-For": {"192.0.2.1"}}, valid, 403, "address"},
		{"content type text/plain", "POST", "/callbacks/strict", http.Header{"Content-Type": {"text/plain"}, "X-Signature": {signHMAC(valid)}}, valid, 415, "content type"},
		{"content type missing", "POST", "/callbacks/strict", http.Header{"X-Signature": {signHMAC(valid)}}, valid, 415, "content type"},
		{"content type form", "POST", "/callbacks/strict", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, valid, 415, "content type"},
		{"over the limit by one byte", "POST", "/callbacks/strict", strictH(strings.Repeat("x", 513)), strings.Repeat("x", 513), 413, "size limit"},
		{"lying content-length", "POST", "/callbacks/strict", strictH(valid), strings.Repeat(" ", 600), 413, "size limit"},
		// Payloads (correctly signed, so they reach the parser)
		{"not json", "POST", "/callbacks/strict", strictH("hello"), "hello", 400, "JSON"},
		{"empty body", "POST", "/callbacks/strict", strictH(""), "", 400, "JSON"},
		{"json array", "POST", "/callbacks/strict", strictH("[1]"), "[1]", 400, "JSON"},
		{"json string", "POST", "/callbacks/strict", strictH(`"x"`), `"x"`, 400, "JSON"},
		{"truncated json", "POST", "/callbacks/strict", strictH(valid[:20]), valid[:20], 400, "JSON"},
		{"invalid utf-8", "POST", "/callbacks/strict", strictH("{\"orderCode\":\"\xff\xfe\",\"paymentNo\":\"P\"}"), "{\"orderCode\":\"\xff\xfe\",\"paymentNo\":\"P\"}", 400, "UTF-8"},
		{"nested 10,000 deep", "POST", "/callbacks/paydemo", pay(wrapDeep, now), wrapDeep, 400, "nesting"},
		{"huge number", "POST", "/callbacks/strict", strictH(`{"orderCode":"O","paymentNo":"P","amount":` + strings.Repeat("9", 60) + `}`), `{"orderCode":"O","paymentNo":"P","amount":` + strings.Repeat("9", 60) + `}`, 400, "number"},
		{"missing business key", "POST", "/callbacks/strict", strictH(`{"paymentNo":"P"}`), `{"paymentNo":"P"}`, 400, "orderCode"},
		{"missing event id", "POST", "/callbacks/strict", strictH(`{"orderCode":"O"}`), `{"orderCode":"O"}`, 400, "paymentNo"},
		{"null business key", "POST", "/callbacks/strict", strictH(`{"orderCode":null,"paymentNo":"P"}`), `{"orderCode":null,"paymentNo":"P"}`, 400, "orderCode"},
		{"key too long", "POST", "/callbacks/strict", strictH(`{"orderCode":"` + strings.Repeat("k", 200) + `","paymentNo":"P"}`), `{"orderCode":"` + strings.Repeat("k", 200) + `","paymentNo":"P"}`, 400, "longer"},
		{"duplicate keys smuggling", "POST", "/callbacks/strict", strictH(`{"orderCode":{"a":1},"paymentNo":"P"}`), `{"orderCode":{"a":1},"paymentNo":"P"}`, 400, "orderCode"},
		// Headers
		{"header injection in id", "POST", "/callbacks/paydemo", payWith(valid, func(h http.Header) { h.Set("webhook-id", "msg_h\r\nX-Evil: 1") }), valid, 401, ""},
		{"oversized headers", "POST", "/callbacks/paydemo", http.Header{"X-Big": {strings.Repeat("a", 40<<10)}}, valid, 431, ""},
		// Admin surface
		{"admin without token", "GET", "/admin/api/callbacks", nil, "", 401, "admin token"},
		{"admin wrong token", "GET", "/admin/api/callbacks", http.Header{"Authorization": {"Bearer nope-nope-nope"}}, "", 401, "admin token"},
		{"admin basic auth", "GET", "/admin/api/callbacks", http.Header{"Authorization": {"Basic b3BzOm9wcy10b2tlbi0wMTIzNDU2Nzg5"}}, "", 401, "admin token"},
		{"admin replay without token", "POST", "/admin/api/callbacks/1/replay", nil, `{"reason":"x"}`, 401, "admin token"},
		{"admin bulk without token", "POST", "/admin/api/replays", nil, `{"source":"paydemo","reason":"x"}`, 401, "admin token"},
	}
	require.GreaterOrEqual(t, len(cases), 40)

	send := func(c tc) (int, []byte) {
		req, err := http.NewRequest(c.method, b.gw.URL+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		for k, v := range c.header {
			req.Header[k] = v
		}
		if c.name == "lying content-length" {
			req.ContentLength = 10 // says 10, sends 600: the limit still holds
			req.Body = io.NopCloser(strings.NewReader(c.body))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, raw := send(c)
			if c.name == "lying content-length" && status == 0 {
				return // the client itself refuses to send more than it declared
			}
			if c.name == "header injection in id" && status == 0 {
				return // net/http refuses to send a header with CR/LF: nothing reached us
			}
			require.Equal(t, c.status, status, "%s", raw)
			if c.status == http.StatusRequestHeaderFieldsTooLarge {
				return // answered by net/http itself, before any handler
			}
			var e map[string]string
			require.NoError(t, json.Unmarshal(raw, &e), "JSON error body: %s", raw)
			require.NotEmpty(t, e["error"])
			require.Contains(t, e["error"], c.reason)
			for _, leak := range []string{"sql", "SQL", "goroutine", ".go:", "panic"} {
				require.NotContains(t, e["error"], leak)
			}
		})
	}

	// The rate-limited source (burst 1, then one request in 1000 s): only
	// requests whose signature holds are counted, so unsigned ones never
	// use up the platform's budget. They are refused for their signature,
	// the first signed one is taken, the next signed ones get 429 with
	// Retry-After.
	post := func(signed bool, paymentNo string) *http.Response {
		body := strings.Replace(valid, "P-1", paymentNo, 1)
		req, _ := http.NewRequest("POST", b.gw.URL+"/callbacks/limited", strings.NewReader(body))
		if signed {
			req.Header.Set("X-Signature", signHMAC(body))
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	for range 5 {
		require.Equal(t, 401, post(false, "P-L0").StatusCode, "unsigned: refused for the signature, not counted")
	}
	require.Equal(t, 200, post(true, "P-L1").StatusCode, "the platform's callback is taken")
	for range 2 {
		resp := post(true, "P-L2")
		require.Equal(t, 429, resp.StatusCode)
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	}
	require.Equal(t, 401, post(false, "P-L3").StatusCode, "an unsigned request is refused for its signature")

	require.Equal(t, 1, b.count(t), "no refused request left a row, the one taken did")
	require.Len(t, b.payments.Drain(time.Second), 1, "only the one taken was announced")
	require.Zero(t, b.logistics.Depth(), "no refused request was announced")

	// Slow loris: a client that sends headers one byte at a time is cut
	// off by the read-header timeout; the gateway stays healthy.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.gw.URL, "http://"))
	require.NoError(t, err)
	_, _ = conn.Write([]byte("POST /callbacks/paydemo HTTP/1.1\r\nHost: x\r\n"))
	conn.Close()

	resp, err := http.Get(b.gw.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "the gateway is still healthy")
	good := []byte(`{"orderCode":"O-OK","paymentNo":"P-OK","amount":1,"status":"SUCCESS"}`)
	a := testenv.Post(t, b.gw.URL, "strict", good, http.Header{"Content-Type": {"application/json; charset=utf-8"}, "X-Signature": {signHMAC(string(good))}})
	require.Equal(t, 200, a.Status, "%s", a.Body)
}

// TestFloodOnOneSourceDoesNotHurtAnother: one source at 10x its rate limit
// while another sends normally; the flood is refused with 429 and the
// normal one never is. Its latency with and without the flood is logged
// for the record, not asserted: on a shared 2-core machine a timed
// assertion fails with whatever else runs (speed is the benchmark's job).
func TestFloodOnOneSourceDoesNotHurtAnother(t *testing.T) {
	t.Parallel()
	b := setup(t, hostileSources, func(c *config.Config) {
		for i := range c.Sources {
			if c.Sources[i].Name == "limited" {
				c.Sources[i].RateLimit = source.RateLimit{Rate: 50, Burst: 50}
			}
		}
		// What the flood may cost the other source is a 429 of its own
		// (none: it has no limit); a store slower than the 2 s default on
		// a loaded machine (a 503, beside a second make test) is the
		// machine's, not the flood's.
		c.MySQL.IntakeTimeout = 30 * time.Second
		c.HTTP.WriteTimeout = time.Minute
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	limited := 0
	normal := func(n int, prefix string) []time.Duration {
		var lat []time.Duration
		for i := range n {
			body := fmt.Sprintf(`{"orderCode":"O-%s-%d","paymentNo":"P-%s-%d","amount":1}`, prefix, i, prefix, i)
			req, _ := http.NewRequest("POST", b.gw.URL+"/callbacks/strict", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Signature", signHMAC(body))
			start := time.Now()
			resp, err := client.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(start))
			if resp.StatusCode == http.StatusTooManyRequests {
				limited++
			}
			require.Contains(t, []int{200, 429}, resp.StatusCode)
		}
		return lat
	}
	p99 := func(lat []time.Duration) time.Duration {
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}

	// The flood runs in bursts; quiet and flooded rounds alternate so that
	// whatever else the machine is doing weighs on both alike.
	var flooding atomic.Bool
	stop := make(chan struct{})
	var flood, floodLimited atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			tick := time.NewTicker(8 * time.Millisecond) // 4 x 125/s = 500/s, 10x the limit
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if !flooding.Load() {
					continue
				}
				body := fmt.Sprintf(`{"orderCode":"F","paymentNo":"F-%d-%d","amount":1}`, g, i)
				req, _ := http.NewRequest("POST", b.gw.URL+"/callbacks/limited", strings.NewReader(body))
				req.Header.Set("X-Signature", signHMAC(body))
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				flood.Add(1)
				if resp.StatusCode == http.StatusTooManyRequests {
					floodLimited.Add(1)
				}
			}
		})
	}
	normal(50, "warm")
	var quietLat, loudLat []time.Duration
	var flooded time.Duration
	const rounds = 5
	for round := range rounds {
		quietLat = append(quietLat, normal(40, fmt.Sprintf("quiet%d", round))...)
		before := flood.Load()
		floodStart := time.Now()
		flooding.Store(true)
		require.Eventually(t, func() bool { return flood.Load() >= before+8 }, 5*time.Second, time.Millisecond, "the flood is under way")
		loudLat = append(loudLat, normal(40, fmt.Sprintf("loud%d", round))...)
		// A round floods well past the bucket (burst 50, 50/s), however
		// quickly the normal source's 40 requests went: otherwise a fast
		// round stays within the burst and too little of it is refused.
		require.Eventually(t, func() bool { return flood.Load() >= before+200 }, 10*time.Second, time.Millisecond, "the flood outlasts the bucket")
		flooding.Store(false)
		flooded += time.Since(floodStart)
	}
	close(stop)
	wg.Wait()
	quiet, loud := p99(quietLat), p99(loudLat)

	t.Logf("normal source p99: quiet %v, during flood %v; flood sent %d, %d got 429", quiet, loud, flood.Load(), floodLimited.Load())
	require.Zero(t, limited, "the normal source is never rate limited")
	// The flood gets what its bucket allows and no more: each round starts
	// with at most a full bucket (50) and earns 50/s while it floods, plus
	// the 4 senders' requests in flight as a round ends. How much of it
	// that is depends on how fast this machine sent it, so the refused
	// share is not asserted (a loaded machine sends slower, and more of a
	// slower flood fits the bucket).
	allowed := int64(rounds*(50+4) + int(50*flooded.Seconds()))
	require.LessOrEqual(t, flood.Load()-floodLimited.Load(), allowed, "the flood got past its rate limit (flooding for %s)", flooded)
	require.Positive(t, floodLimited.Load(), "the flood is refused past its bucket")
}
