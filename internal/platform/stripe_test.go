package platform_test

import (
	"callgate/internal/store"
	"callgate/internal/worker"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v82"
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

// TestStripeUnreadableIsKeptAndReadAgainOnReplay: a validly signed
// payment_intent.succeeded whose order is not where the source looks
// (Checkout copies metadata to the Session, not the PaymentIntent; this
// shop puts it under metadata.order_id) is stored and answered 2xx, so
// Stripe stops retrying, and FAILED with the reason; once the
// configuration is fixed (order_path), a replay reads the raw body again
// and pays the order.
func TestStripeUnreadableIsKeptAndReadAgainOnReplay(t *testing.T) {
	cfg := testenv.Config(t, testenv.WithPlatform("stripe", stripeConfig(stripeSecret)))
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	first := testenv.StartWorker(t, cfg, worker.Options{})
	st := testenv.Store(t, cfg)
	_, err := st.SQL.Exec(`INSERT INTO orders (order_code, user_id, amount, currency) VALUES ('ORD-ST-ID', 7, 1200, 'USD')`)
	require.NoError(t, err)
	body := []byte(`{"id":"evt_oid","object":"event","api_version":"2025-08-27.basil","created":1764547200,"livemode":false,"type":"payment_intent.succeeded",` +
		`"data":{"object":{"id":"pi_oid","object":"payment_intent","amount":1200,"amount_received":1200,"currency":"usd","metadata":{"order_id":"ORD-ST-ID"}}}}`)
	a := testenv.PostRaw(t, gw.URL, "stripe", body, stripeSigned(body, stripeSecret, time.Now()))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	var ids []int64
	require.NoError(t, st.DB.Table("callback_log").Where("event_id = ?", "evt_oid").Pluck("id", &ids).Error)
	require.Len(t, ids, 1, "stored: nothing signed is lost")
	row := st.WaitStatus(t, ids[0], callback.StatusFailed)
	require.Equal(t, `the notification could not be read: field "data.object.metadata.order_code" is missing`, *row.LastError)
	require.Equal(t, 1, row.Attempts)
	require.Equal(t, payment.OrderUnpaid, orderStatus(t, st, "ORD-ST-ID"), "nothing processed")

	// The fix: the source reads the order where this shop puts it.
	require.NoError(t, first.Stop())
	fixed := *cfg
	fixed.Sources = slices.Clone(cfg.Sources)
	for i := range fixed.Sources {
		if fixed.Sources[i].Name == "stripe" {
			fixed.Sources[i].Platform.OrderPath = "data.object.metadata.order_id"
		}
	}
	testenv.StartWorker(t, &fixed, worker.Options{})
	require.NoError(t, st.InTx(t.Context(), func(tx *store.Tx) error {
		return st.MakePendingTx(t.Context(), tx, ids, time.Now().UTC())
	}))
	testenv.Publish(t, cfg, "payment", fmt.Sprintf(`{"log_ids":[%d]}`, ids[0]))
	row = st.WaitStatus(t, ids[0], callback.StatusSuccess)
	require.Equal(t, payment.OrderPaid, orderStatus(t, st, "ORD-ST-ID"))
	require.JSONEq(t, `{"orderCode":"ORD-ST-ID","paymentNo":"pi_oid","amount":1200,"currency":"USD","status":"SUCCESS","paidAt":"2025-12-01T00:00:00Z"}`,
		string(row.Normalized), "the event read again is stored")
}

func orderStatus(t *testing.T, st *testenv.TestStore, code string) string {
	t.Helper()
	var s string
	require.NoError(t, st.SQL.QueryRow(`SELECT payment_status FROM orders WHERE order_code = ?`, code).Scan(&s))
	return s
}

// TestStripeSDKTestEventIsKept: stripe-go's own minimal test event (the
// payload its webhook tests sign with webhook.GenerateTestSignedPayload:
// an id, object and api_version, no type, no livemode) is validly signed,
// so it is answered 2xx, or Stripe would resend it for three days, and
// kept as a notification that could not be read: FAILED with the reason,
// nothing processed; its resend is a duplicate.
func TestStripeSDKTestEventIsKept(t *testing.T) {
	p := testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret))
	payload := fmt.Appendf(nil, "{\n  \"id\": \"evt_test_webhook\",\n  \"object\": \"event\",\n  \"api_version\": %q\n}", stripego.APIVersion)
	post := func() testenv.RawAnswer {
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: stripeSecret})
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("Stripe-Signature", signed.Header)
		return p.Post(t, "stripe", signed.Payload, h)
	}

	a := post()
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	var ans struct {
		Status    string            `json:"status"`
		Callbacks []platform.Stored `json:"callbacks"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &ans))
	require.Equal(t, "accepted", ans.Status)
	require.Len(t, ans.Callbacks, 1)
	row := p.St.WaitStatus(t, ans.Callbacks[0].LogID, callback.StatusFailed)
	require.Equal(t, "evt_test_webhook", row.EventID)
	require.Equal(t, "evt_test_webhook", row.BusinessKey, "no order, no payment: kept under its id")
	require.Equal(t, payload, row.Payload)
	require.Equal(t, `the notification could not be read: field "type" is missing`, *row.LastError)
	require.Empty(t, p.St.Notifications(t, row.ID), "nothing processed")

	again := post()
	require.Equal(t, http.StatusOK, again.Status, string(again.Body))
	require.Contains(t, string(again.Body), fmt.Sprintf(`{"log_id":%d,"duplicate":true}`, row.ID))
	require.Equal(t, 1, p.Callbacks(t, "stripe"))
}
