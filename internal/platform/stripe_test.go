package platform_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

const stripeSecret = "whsec_test_callgate_stripe_secret"

// stripeEvent is a Stripe Event of type typ about a PaymentIntent for order.
func stripeEvent(id, typ, order, pi string, amount int64) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2025-08-27.basil","created":1764547200,"livemode":false,`+
		`"type":%q,"data":{"object":{"id":%q,"object":"payment_intent","amount":%d,"amount_received":%d,"currency":"usd","status":"succeeded",`+
		`"metadata":{"order_code":%q}}}}`, id, typ, pi, amount, amount, order)
}

// stripeConfig is the stripe preset's keys for the test-mode events of
// these tests (livemode false, no connected account).
func stripeConfig(secrets ...string) platform.Config {
	return platform.Config{Secrets: secrets, Livemode: "false"}
}

// stripeSigned signs body with stripe-go's own test helper (the
// independent oracle), at ts with secret.
func stripeSigned(body []byte, secret string, ts time.Time) http.Header {
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: ts})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Stripe-Signature", signed.Header)
	return h
}

func TestStripePaysTheOrder(t *testing.T) {
	p := testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret))
	p.CreateOrder(t, "ORD-ST-1", 1999, "USD")
	body := stripeEvent("evt_1", "payment_intent.succeeded", "ORD-ST-1", "pi_1", 1999)

	a := p.Post(t, "stripe", body, stripeSigned(body, stripeSecret, time.Now()))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	var ans struct {
		Callbacks []platform.Stored `json:"callbacks"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &ans))
	require.Len(t, ans.Callbacks, 1)
	require.False(t, ans.Callbacks[0].Duplicate)

	row := p.Settled(t, "stripe", "evt_1")
	require.Equal(t, "ORD-ST-1", row.BusinessKey)
	require.Equal(t, body, row.Payload, "the raw body is stored byte for byte")
	var ev callback.PaymentEvent
	require.NoError(t, json.Unmarshal(row.Normalized, &ev))
	require.Equal(t, callback.PaymentEvent{OrderCode: "ORD-ST-1", PaymentNo: "pi_1", Amount: 1999, Currency: "USD",
		Status: callback.PaymentSuccess, PaidAt: ev.PaidAt}, ev)
	o := p.Order(t, "ORD-ST-1")
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Equal(t, "pi_1", *o.PaymentNo)

	again := p.Post(t, "stripe", body, stripeSigned(body, stripeSecret, time.Now()))
	require.Equal(t, http.StatusOK, again.Status)
	require.Contains(t, string(again.Body), fmt.Sprintf(`{"log_id":%d,"duplicate":true}`, row.ID), "Stripe's resend is a duplicate")
	require.Equal(t, 1, p.Callbacks(t, "stripe"))
}

func TestStripeFailedAndOtherEvents(t *testing.T) {
	p := testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret))
	p.CreateOrder(t, "ORD-ST-2", 500, "USD")
	failed := stripeEvent("evt_2", "payment_intent.payment_failed", "ORD-ST-2", "pi_2", 500)
	require.Equal(t, http.StatusOK, p.Post(t, "stripe", failed, stripeSigned(failed, stripeSecret, time.Now())).Status)
	p.Settled(t, "stripe", "evt_2")
	require.Equal(t, payment.OrderPaymentFailed, p.Order(t, "ORD-ST-2").PaymentStatus)

	other := stripeEvent("evt_3", "customer.created", "ORD-ST-2", "pi_2", 500)
	require.Equal(t, http.StatusOK, p.Post(t, "stripe", other, stripeSigned(other, stripeSecret, time.Now())).Status)
	row := p.Settled(t, "stripe", "evt_3")
	require.Contains(t, p.LastNote(t, row.ID), "customer.created", "the attempt says why nothing changed")
	require.Equal(t, payment.OrderPaymentFailed, p.Order(t, "ORD-ST-2").PaymentStatus, "no business effect")
}

func TestStripeRefusals(t *testing.T) {
	p := testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret))
	body := stripeEvent("evt_bad", "payment_intent.succeeded", "ORD-ST-9", "pi_9", 100)
	tampered := stripeSigned(body, stripeSecret, time.Now())
	cases := map[string]struct {
		body []byte
		h    http.Header
	}{
		"wrong signature": {body, func() http.Header {
			h := stripeSigned(body, stripeSecret, time.Now())
			h.Set("Stripe-Signature", h.Get("Stripe-Signature")[:len(h.Get("Stripe-Signature"))-4]+"0000")
			return h
		}()},
		"tampered body":   {stripeEvent("evt_bad", "payment_intent.succeeded", "ORD-ST-9", "pi_9", 1), tampered},
		"stale timestamp": {body, stripeSigned(body, stripeSecret, time.Now().Add(-10*time.Minute))},
		"wrong key":       {body, stripeSigned(body, "whsec_another_secret", time.Now())},
	}
	for name, c := range cases {
		a := p.Post(t, "stripe", c.body, c.h)
		require.Equal(t, http.StatusUnauthorized, a.Status, "%s: %s", name, a.Body)
		require.Contains(t, string(a.Body), "invalid signature", name)
	}
	require.Zero(t, p.Callbacks(t, "stripe"), "nothing refused is stored")
}
