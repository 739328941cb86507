package platform_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"callgate/internal/callback"
	"callgate/internal/platform"
)

// checkRead asserts what every preset's Read promises for any input: no
// panic, and either an error or callbacks whose ids a row can hold and
// whose event is a canonical one.
func checkRead(t *testing.T, p platform.Platform, req platform.Request) {
	cbs, err := p.Read(req)
	if err != nil {
		require.NotEmpty(t, err.Error())
		return
	}
	for _, cb := range cbs {
		require.NotEmpty(t, cb.EventID)
		require.NotEmpty(t, cb.BusinessKey)
		if cb.Unreadable != "" {
			// Signed and ours but unreadable: kept with its reason.
			require.Nil(t, cb.Event)
			continue
		}
		switch ev := cb.Event.(type) {
		case callback.PaymentEvent:
			require.True(t, ev.Ignored != "" || ev.Status == callback.PaymentSuccess || ev.Status == callback.PaymentFailed, "%+v", ev)
			require.GreaterOrEqual(t, ev.Amount, int64(0))
		case callback.CarrierEvent:
			require.NotEmpty(t, ev.WaybillNo)
		default:
			t.Fatalf("not a canonical event: %T", cb.Event)
		}
	}
}

// FuzzStripeRead signs whatever body the fuzzer makes, so the parsing
// behind the signature is what gets explored.
func FuzzStripeRead(f *testing.F) {
	p, err := platform.New("stripe", stripeConfig(stripeSecret))
	require.NoError(f, err)
	f.Add(stripeEvent("evt_1", "payment_intent.succeeded", "ORD-1", "pi_1", 100), true)
	f.Add(stripeEvent("evt_2", "payment_intent.payment_failed", "ORD-1", "pi_1", 100), true)
	f.Add([]byte(`{"id":"evt_3","type":"payment_intent.succeeded","data":{"object":{"amount":1.5}}}`), true)
	f.Add([]byte(`{"id":1,"type":"x"}`), false)
	f.Fuzz(func(t *testing.T, body []byte, sign bool) {
		h := http.Header{}
		if sign {
			h.Set("Stripe-Signature", webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret}).Header)
		}
		checkRead(t, p, platform.Request{Header: h, Body: body, Now: time.Now()})
	})
}

func FuzzShopifyRead(f *testing.F) {
	p, err := platform.New("shopify", shopifyConfig(shopifySecret))
	require.NoError(f, err)
	f.Add(shopifyOrder("#1", 1, "1.00"), "orders/paid", "wh-1")
	f.Add([]byte(`{"name":"#1","id":1,"total_price":"1e3"}`), "orders/paid", "wh-2")
	f.Add([]byte(`{"name":"","id":null}`), "orders/create", "")
	f.Fuzz(func(t *testing.T, body []byte, topic, id string) {
		h := shopifySigned(body, shopifySecret, id, topic)
		checkRead(t, p, platform.Request{Header: h, Body: body, Now: time.Now()})
	})
}
