package platform_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/platform"
	"callgate/internal/signature"
	"callgate/internal/testenv"
)

// BenchmarkJSONHMAC is the reference the presets are compared with: what
// the intake does for a source configured field by field with a plain
// HMAC over a JSON body (shipdemo): verify, check the JSON's shape, find
// the event id and business key.
func BenchmarkJSONHMAC(b *testing.B) {
	v, err := signature.New(signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"shipdemo-demo-secret"}})
	require.NoError(b, err)
	ex := callback.NewExtractor([]string{"waybillNo", "seq"}, ":", "waybillNo", false)
	body := testenv.ShipmentBody("WB-BENCH-1", "ORD-BENCH-1", 3, "IN_TRANSIT")
	h := http.Header{"X-Signature": {signature.SignHMAC("shipdemo-demo-secret", body, "hex", "")}}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(h, body, now); err != nil {
			b.Fatal(err)
		}
		if err := callback.CheckJSONShape(body); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ex.Extract(body, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRead measures one preset's Read of a valid request, plus the
// encoding of its normalized event (what the intake adds for a preset).
func benchRead(b *testing.B, p platform.Platform, req platform.Request) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		cbs, err := p.Read(req)
		if err != nil {
			b.Fatal(err)
		}
		for _, cb := range cbs {
			if _, err := callback.MarshalEvent(cb.Event); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkStripeRead(b *testing.B) {
	p, err := platform.New("stripe", stripeConfig(stripeSecret))
	require.NoError(b, err)
	body := stripeEvent("evt_bench", "payment_intent.succeeded", "ORD-BENCH-1", "pi_bench", 1999)
	benchRead(b, p, platform.Request{Header: stripeSigned(body, stripeSecret, time.Now()), Body: body, Now: time.Now()})
}

func BenchmarkShopifyRead(b *testing.B) {
	p, err := platform.New("shopify", shopifyConfig(shopifySecret))
	require.NoError(b, err)
	body := shopifyOrder("#1001", 820982911946154508, "25.50")
	benchRead(b, p, platform.Request{Header: shopifySigned(body, shopifySecret, "wh-bench", "orders/paid"), Body: body, Now: time.Now()})
}
