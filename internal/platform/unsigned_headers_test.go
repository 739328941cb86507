package platform_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/testenv"
)

// unsignedHeaders says, per source, what of a request its signature does
// not cover (docs/security.md, "Replays": the table of signed bytes and
// event ids): the headers a captured delivery can be re-sent with, changed
// to anything, and the ones that choose the key (changed, the signature no
// longer holds). Every other header of the request is covered, or is the
// signature itself.
var unsignedHeaders = map[string]struct {
	// changed are set to new values (every header not signed that the
	// platform sends, and that the preset stores or reads).
	changed map[string]string
	// keySelectors name the key to verify with: another value is refused.
	keySelectors map[string]string
}{
	"paydemo":  {changed: map[string]string{"Content-Type": "application/json; charset=utf-8"}},
	"shipdemo": {changed: map[string]string{"Content-Type": "application/json; charset=utf-8"}},
	"stripe":   {changed: map[string]string{"Content-Type": "application/json; charset=utf-8"}},
	// The form's charset is read from the signed charset parameter, never
	// from the Content-Type.
	"alipay": {changed: map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=GBK"}},
	"wechatpay": {changed: map[string]string{"Request-Id": "08F78BB5AF0610D302A3A4E4B10118A4E2BA2E6A0"},
		keySelectors: map[string]string{"Wechatpay-Serial": "PUB_KEY_ID_0000000000000000000000000000", "Wechatpay-Signature-Type": "WECHATPAY2-SM2-WITH-SM3"}},
	"adyen":     {changed: map[string]string{"Content-Type": "application/json; charset=utf-8"}},
	"kuaidi100": {changed: map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=GBK"}},
	// The shop header names another configured shop: the body names its
	// own (order_status_url), or the event id is Shopify's order id,
	// unique across shops.
	"shopify": {changed: map[string]string{"X-Shopify-Topic": "refunds/create", "X-Shopify-Shop-Domain": "other-shop.myshopify.com",
		"X-Shopify-Webhook-Id": "00000000-0000-0000-0000-000000000000", "X-Shopify-Event-Id": "11111111-1111-1111-1111-111111111111",
		"X-Shopify-Triggered-At": "2030-01-01T00:00:00Z", "X-Shopify-Api-Version": "2019-04", "Content-Type": "application/json; charset=utf-8"}},
}

// TestCapturedDeliveryWithEveryUnsignedHeaderChanged: per preset and
// configured source, a delivery captured and re-sent with every header its
// signature does not cover changed (plus headers the platform never
// sends) is answered as a duplicate, in the platform's words, and adds no
// row; the same request with its key selector changed is refused and adds
// none either. An event id built from anything unsigned fails here.
func TestCapturedDeliveryWithEveryUnsignedHeaderChanged(t *testing.T) {
	p := testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret), intakePlatforms()...)
	for n, c := range intakeCases {
		u, ok := unsignedHeaders[c.source]
		require.True(t, ok, "no unsigned headers listed for %s", c.source)
		r := c.build(t, p.Cfg, 90_000_000+n)
		first := p.Post(t, c.source, r.body, r.h)
		require.True(t, first.Status/100 == 2, "%s: %d %s", c.source, first.Status, first.Body)
		rows := p.Callbacks(t, c.source)
		require.Equal(t, 1, rows, c.source)
		dups := duplicates(t, p, c.source)

		h := r.h.Clone()
		for k, v := range u.changed {
			require.NotEqual(t, v, h.Get(k), "%s: %s must change", c.source, k)
			h.Set(k, v)
		}
		for k, v := range map[string]string{"User-Agent": "replayer/1.0", "X-Forwarded-For": "203.0.113.9",
			"X-Request-Id": "replayed", "Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"} {
			h.Set(k, v)
		}
		again := p.Post(t, c.source, r.body, h)
		require.Equal(t, first.Status, again.Status, "%s: %s", c.source, again.Body)
		require.Equal(t, strings.ReplaceAll(string(first.Body), `"duplicate":false`, `"duplicate":true`), string(again.Body), c.source)
		// Counted once the answer is written: a moment after it arrives.
		require.Eventually(t, func() bool { return duplicates(t, p, c.source) == dups+1 }, 5*time.Second, 10*time.Millisecond,
			"%s: counted as a duplicate", c.source)
		require.Equal(t, rows, p.Callbacks(t, c.source), "%s: no row added", c.source)

		for k, v := range u.keySelectors {
			h := r.h.Clone()
			h.Set(k, v)
			refused := p.Post(t, c.source, r.body, h)
			require.True(t, refused.Status == http.StatusUnauthorized || refused.Status == http.StatusBadRequest,
				"%s with another %s: %d %s", c.source, k, refused.Status, refused.Body)
			require.Equal(t, rows, p.Callbacks(t, c.source), "%s: no row added", c.source)
		}
	}
}

// duplicates reads callgate_intake_requests_total{result="duplicate"} of
// source from the gateway's /metrics.
func duplicates(t *testing.T, p *testenv.Platform, source string) int {
	t.Helper()
	resp, err := http.Get(p.GW.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	re := regexp.MustCompile(fmt.Sprintf(`(?m)^callgate_intake_requests_total\{[^}]*result="duplicate"[^}]*source="%s"[^}]*\} (\d+)$`, regexp.QuoteMeta(source)))
	m := re.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}
