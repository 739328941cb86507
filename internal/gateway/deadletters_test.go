package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"callgate/internal/config"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

const deadLetterStripeSecret = "whsec_test_callgate_dead_letters"

// withTwoStripeSources enables the shipped stripe source and a second one,
// stripe-eu, with the same preset and secret: two sources whose dead
// letters are counted apart.
func withTwoStripeSources(c *config.Config) {
	testenv.WithPlatform("stripe", platform.Config{Secrets: []string{deadLetterStripeSecret}, Livemode: "false"})(c)
	for _, s := range c.Sources {
		if s.Name == "stripe" {
			eu := s
			eu.Name = "stripe-eu"
			c.Sources = append(c.Sources, eu)
			return
		}
	}
}

// unreadableStripe is a signed test-mode event of ours that the preset
// cannot read (its PaymentIntent carries no order code): a dead letter.
func unreadableStripe(id string, pad int) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"payment_intent.succeeded","livemode":false,"created":1764547200,`+
		`"data":{"object":{"object":"payment_intent","id":"pi_%s","amount":100,"amount_received":100,"currency":"usd","description":%q}}}`,
		id, id, strings.Repeat("x", pad))
}

// postStripe signs body as Stripe does, now, and posts it to source.
func postStripe(t *testing.T, url, source string, body []byte) testenv.RawAnswer {
	t.Helper()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: deadLetterStripeSecret, Timestamp: time.Now()})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Stripe-Signature", signed.Header)
	return testenv.PostRaw(t, url, source, body, h)
}

// metric reads one series of the gateway's /metrics (0 when absent).
func metric(t *testing.T, url, name, source string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*source="` + regexp.QuoteMeta(source) + `"[^}]*\} (\S+)$`)
	m := re.FindSubmatch(raw)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// TestDeadLettersAreBoundedPerSource: a source stores at most
// dead_letters.max_per_hour new notifications an hour that it cannot read;
// the next is answered 429 with Retry-After in the platform's words,
// naming the source and the limit, nothing is stored, a warning with the
// trace id says so and callgate_dead_letters_refused_total counts it. A
// resend of a dead letter already stored costs nothing and is still
// answered as a duplicate past the limit; readable notifications and
// another source are not limited.
func TestDeadLettersAreBoundedPerSource(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, withTwoStripeSources, func(c *config.Config) {
		c.DeadLetters = config.DeadLetters{MaxPerHour: 3}
	})
	url, logs := startLogged(t, cfg)
	st := testenv.Store(t, cfg)
	rows := func(source string) int {
		var n int64
		require.NoError(t, st.DB.Table("callback_log").Where("source = ?", source).Count(&n).Error)
		return int(n)
	}
	accepted := func(source, id string) (duplicate bool) {
		t.Helper()
		a := postStripe(t, url, source, unreadableStripe(id, 10))
		require.Equal(t, http.StatusOK, a.Status, "%s %s: %s", source, id, a.Body)
		var body struct{ Callbacks []struct{ Duplicate bool } }
		require.NoError(t, json.Unmarshal(a.Body, &body), "%s", a.Body)
		require.Len(t, body.Callbacks, 1, "%s", a.Body)
		return body.Callbacks[0].Duplicate
	}

	require.False(t, accepted("stripe", "evt_dead_0"))
	require.True(t, accepted("stripe", "evt_dead_0"), "a resend is a duplicate, and costs nothing")
	require.False(t, accepted("stripe", "evt_dead_1"))
	require.False(t, accepted("stripe", "evt_dead_2"), "the third new one fits: the resend was not counted")
	require.Equal(t, 3, rows("stripe"))

	over := postStripe(t, url, "stripe", unreadableStripe("evt_dead_3", 10))
	require.Equal(t, http.StatusTooManyRequests, over.Status, "%s", over.Body)
	retry, err := strconv.Atoi(over.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After: %q", over.Header.Get("Retry-After"))
	require.True(t, retry >= 1 && retry <= 1200, "a third of an hour at most gives one back: %d s", retry)
	require.JSONEq(t, `{"error":"source stripe has stored its limit of notifications it cannot read (dead_letters: 3 notifications an hour), retry later"}`,
		string(over.Body), "the preset's own refusal")
	require.Equal(t, 3, rows("stripe"), "nothing stored")
	var stored int64
	require.NoError(t, st.DB.Table("callback_log").Where("event_id = ?", "evt_dead_3").Count(&stored).Error)
	require.Zero(t, stored)

	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "intake: request refused" && m["status"] == float64(429) {
			line = m
		}
	}
	require.NotNil(t, line, "a line says why:\n%s", logs.String())
	require.Equal(t, "WARN", line["level"])
	require.Equal(t, "stripe", line["source"])
	require.Contains(t, line["reason"], "dead_letters: 3 notifications an hour")
	require.Equal(t, over.Header.Get("X-Trace-Id"), line["trace_id"])

	require.True(t, accepted("stripe", "evt_dead_1"), "past the limit, a resend of a stored dead letter is still a duplicate")
	require.Equal(t, 3, rows("stripe"))

	// Readable notifications are not dead letters.
	ok := postStripe(t, url, "stripe", fmt.Appendf(nil, `{"id":"evt_ok","object":"event","type":"payment_intent.succeeded","livemode":false,"created":1764547200,`+
		`"data":{"object":{"object":"payment_intent","id":"pi_ok","amount":100,"amount_received":100,"currency":"usd","metadata":{"order_code":"ORD-DL-1"}}}}`))
	require.Equal(t, http.StatusOK, ok.Status, "%s", ok.Body)

	// Another source has its own budget.
	require.False(t, accepted("stripe-eu", "evt_dead_3"))
	require.Equal(t, 1, rows("stripe-eu"))

	require.EqualValues(t, 1, metric(t, url, "callgate_dead_letters_refused_total", "stripe"))
	require.EqualValues(t, 3, metric(t, url, "callgate_dead_letters_total", "stripe"), "new dead letters only")
	require.EqualValues(t, 1, metric(t, url, "callgate_dead_letters_total", "stripe-eu"))
	require.Zero(t, metric(t, url, "callgate_dead_letters_refused_total", "stripe-eu"))
}

// TestDeadLetterBytesAreBounded: dead_letters.max_bytes_per_hour bounds
// the bodies a source's dead letters store in an hour, whatever their
// number.
func TestDeadLetterBytesAreBounded(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, withTwoStripeSources, func(c *config.Config) {
		for i := range c.Sources {
			if c.Sources[i].Name == "stripe" {
				c.Sources[i].MaxBodyBytes = 4096
			}
		}
		limit := int64(8192)
		c.DeadLetters.Sources = map[string]config.DeadLetterLimit{"stripe": {MaxBytesPerHour: &limit}}
	})
	url, _ := startLogged(t, cfg)
	st := testenv.Store(t, cfg)
	for i := range 2 {
		a := postStripe(t, url, "stripe", unreadableStripe(fmt.Sprintf("evt_big_%d", i), 3000))
		require.Equal(t, http.StatusOK, a.Status, "%s", a.Body)
	}
	over := postStripe(t, url, "stripe", unreadableStripe("evt_big_2", 3000))
	require.Equal(t, http.StatusTooManyRequests, over.Status, "%s", over.Body)
	require.Contains(t, string(over.Body), "dead_letters: 100 notifications or 8192 bytes an hour")
	require.NotEmpty(t, over.Header.Get("Retry-After"))
	small := postStripe(t, url, "stripe", unreadableStripe("evt_small", 10))
	require.Equal(t, http.StatusOK, small.Status, "a smaller one still fits: %s", small.Body)
	var n int64
	require.NoError(t, st.DB.Table("callback_log").Where("source = ?", "stripe").Count(&n).Error)
	require.EqualValues(t, 3, n)
	require.EqualValues(t, 1, metric(t, url, "callgate_dead_letters_refused_total", "stripe"))
}
