package platform_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/reconcile"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/internal/worker"
	"callgate/test/platformsim"
)

// The Stripe account's secret key the tests list events with.
const stripeAPIKey = "sk_test_51CallgateReconcileKey0123456789abcdef"

// stripeReconcile is a gateway and a worker with the stripe source (test
// mode) catching up on a Stripe events-list simulator.
type stripeReconcile struct {
	*reconciled
	sim *platformsim.Stripe
}

// setup (optional) shapes the simulator before the worker starts, for
// what the first catch-up must already see (Stripe down, an event created
// long ago): one that ran before the test set it up would have listed an
// empty window and moved the checkpoint past it.
func startStripeReconcile(t *testing.T, rc reconcile.Config, setup ...func(*platformsim.Stripe)) *stripeReconcile {
	t.Helper()
	sim := platformsim.StartStripe(t, stripeAPIKey)
	for _, f := range setup {
		f(sim)
	}
	r := startReconciled(t, "stripe", "USD", stripeConfig(stripeSecret), rc,
		func(c *source.Reconcile) { c.APIKey, c.APIBase = stripeAPIKey, sim.URL })
	return &stripeReconcile{reconciled: r, sim: sim}
}

// checkpoint is the stripe source's row in reconcile_checkpoints (ok
// false: none).
func (s *stripeReconcile) checkpoint(t *testing.T) (time.Time, bool) {
	t.Helper()
	var until []time.Time
	require.NoError(t, s.St.DB.Table("reconcile_checkpoints").Where("source = ?", "stripe").Pluck("listed_until", &until).Error)
	if len(until) == 0 {
		return time.Time{}, false
	}
	return until[0].UTC(), true
}

// events counts the callback_log rows of the stripe source with eventID.
func (s *stripeReconcile) events(t *testing.T, eventID string) int {
	t.Helper()
	var n int64
	require.NoError(t, s.St.DB.Table("callback_log").Where("source = 'stripe' AND event_id = ?", eventID).Count(&n).Error)
	return int(n)
}

// notes lists the routing keys of the notifications written about order.
func (s *stripeReconcile) notes(t *testing.T, order string) []string {
	t.Helper()
	var keys []string
	require.NoError(t, s.St.DB.Table("outbox").Where("payload LIKE ?", "%"+order+"%").Order("id").Pluck("routing_key", &keys).Error)
	return keys
}

// stripeEventAt is a Stripe Event (docs.stripe.com/api/events/object) of
// type typ created at created, about PaymentIntent pi of order, in test
// mode: what Stripe both lists and posts to the webhook.
func stripeEventAt(id, typ, order, pi string, amount int64, created time.Time) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2025-08-27.basil","created":%d,`+
		`"data":{"object":{"id":%q,"object":"payment_intent","amount":%d,"amount_capturable":0,"amount_received":%d,"capture_method":"automatic",`+
		`"client_secret":"%s_secret_x","confirmation_method":"automatic","created":%d,"currency":"usd","latest_charge":"ch_%s","livemode":false,`+
		`"metadata":{"order_code":%q},"payment_method_types":["card"],"status":"succeeded"}},`+
		`"livemode":false,"pending_webhooks":1,"request":{"id":"req_%s","idempotency_key":null},"type":%q}`,
		id, created.Unix(), pi, amount, amount, pi, created.Unix()-5, pi, order, pi, typ)
}

// createdParam reads a list request's created[op].
func createdParam(t *testing.T, q url.Values, op string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(q.Get("created["+op+"]"), 10, 64)
	require.NoError(t, err, "created[%s] of %v", op, q)
	return time.Unix(n, 0).UTC()
}

// TestReconcileFindsAStripeEventTheWebhookMissed: a payment_intent.succeeded
// whose webhook was never delivered is fetched from the events list,
// stored under its own event id (origin reconcile, the event's JSON as
// listed) and pays the order once; the late webhook of the same event is
// then answered as an exact duplicate and changes nothing.
func TestReconcileFindsAStripeEventTheWebhookMissed(t *testing.T) {
	// `after` short, and the event created now: whenever the first
	// catch-up runs (before the event exists, on a loaded machine), the
	// checkpoint it leaves is `after` behind it, so a later one lists it;
	// and the order exists before its payment does, as in life.
	const after = time.Second
	s := startStripeReconcile(t, reconcile.Config{After: after, Backoff: []time.Duration{time.Hour}})
	const order = "ST-RC-1"
	s.order(t, order, 1999, 5*time.Minute)
	ev := stripeEventAt("evt_1RcMissed", "payment_intent.succeeded", order, "pi_1RcMissed", 1999, time.Now())
	s.sim.AddEvent(t, ev, false)

	o := s.waitStatus(t, order, payment.OrderPaid)
	require.Equal(t, "pi_1RcMissed", *o.PaymentNo)
	row := s.Settled(t, "stripe", "evt_1RcMissed")
	require.Equal(t, callback.OriginReconcile, row.Origin)
	require.Equal(t, order, row.BusinessKey)
	require.Equal(t, ev, row.Payload, "the event's JSON, as Stripe listed it")
	require.Equal(t, []string{payment.RoutingWarehouseShip, payment.RoutingPointsAdd}, s.notes(t, order))

	// The webhook of the same event, late (Stripe retries for 3 days).
	a := s.Post(t, "stripe", ev, stripeSigned(ev, stripeSecret, time.Now()))
	require.Equal(t, http.StatusOK, a.Status, "%s", a.Body)
	require.Contains(t, string(a.Body), fmt.Sprintf(`{"log_id":%d,"duplicate":true}`, row.ID))
	time.Sleep(300 * time.Millisecond) // several runs of the job
	require.Equal(t, 1, s.Callbacks(t, "stripe"))
	require.Equal(t, []string{payment.RoutingWarehouseShip, payment.RoutingPointsAdd}, s.notes(t, order), "nothing twice")
	require.Equal(t, callback.StatusSuccess, s.St.WaitStatus(t, row.ID, callback.StatusSuccess).Status)
	require.Zero(t, s.sim.Refusals(), "every request carried the key as Stripe takes it")
}

// TestReconcileStripeDownOrKeyRefused: Stripe answering 503 pauses the
// source (counted throttled, the order not charged a query: it has no
// reconciliation row) and stores nothing, moving no checkpoint; refusing
// the key (401) is recorded on the order with Stripe's message; once
// Stripe answers, the event is found.
func TestReconcileStripeDownOrKeyRefused(t *testing.T) {
	const order = "ST-RC-DOWN"
	s := startStripeReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{300 * time.Millisecond}, PauseDefault: 300 * time.Millisecond},
		func(sim *platformsim.Stripe) {
			sim.Down(true)
			sim.AddEvent(t, stripeEventAt("evt_1RcDown", "payment_intent.succeeded", order, "pi_1RcDown", 500, time.Now().Add(-2*time.Minute)), false)
		})
	s.order(t, order, 500, 5*time.Minute)

	require.Eventually(t, func() bool {
		p, err := s.St.ReconcilePlatform(t.Context(), "stripe")
		return err == nil && p.PausedUntil != nil && strings.Contains(p.PauseReason, "HTTP 503")
	}, 15*time.Second, 20*time.Millisecond, "paused by the 503")
	require.Eventually(t, func() bool { return queries(t, s.metrics, "stripe", reconcile.OutcomeThrottled) >= 2 }, 15*time.Second, 20*time.Millisecond)
	_, err := s.St.GetReconcile(t.Context(), order)
	require.ErrorIs(t, err, store.ErrNotFound, "the order was not charged a query")
	require.Zero(t, s.Callbacks(t, "stripe"))
	_, ok := s.checkpoint(t)
	require.False(t, ok, "no listing was stored: no checkpoint")

	s.sim.Revoke(true)
	s.sim.Down(false)
	st := s.state(t, order, func(st store.ReconcileState) bool {
		return st.LastOutcome == reconcile.OutcomeRefused && strings.Contains(st.LastError, "401")
	})
	require.Contains(t, st.LastError, "Invalid API Key provided: sk_test_")
	require.NotContains(t, st.LastError, stripeAPIKey, "the key is not logged")
	require.Positive(t, s.sim.Refusals())
	require.Zero(t, s.Callbacks(t, "stripe"))
	_, ok = s.checkpoint(t)
	require.False(t, ok)
	require.Equal(t, payment.OrderUnpaid, s.Order(t, order).PaymentStatus)

	s.sim.Revoke(false)
	s.waitStatus(t, order, payment.OrderPaid)
	require.Equal(t, callback.OriginReconcile, s.Settled(t, "stripe", "evt_1RcDown").Origin)
	require.Eventually(t, func() bool { _, ok := s.checkpoint(t); return ok }, 5*time.Second, 20*time.Millisecond)
}

// TestReconcileStripeCheckpoint: the first listing asks from give_up back,
// up to `after` ago, for the undelivered events of the types the preset
// maps; each later one asks created[gte] the checkpoint the one before
// stored; an event whose webhook was delivered is not asked for; an event
// that fails to be stored (the database refusing it) keeps the checkpoint
// where it was, and is stored once it can be.
func TestReconcileStripeCheckpoint(t *testing.T) {
	const after = 2 * time.Second
	s := startStripeReconcile(t, reconcile.Config{After: after, GiveUp: 6 * time.Hour, Backoff: []time.Duration{300 * time.Millisecond}})
	started := time.Now()
	s.order(t, "ST-RC-DELIVERED", 700, time.Hour)
	s.sim.AddEvent(t, stripeEventAt("evt_1RcDelivered", "payment_intent.succeeded", "ST-RC-DELIVERED", "pi_1RcDelivered", 700, started.Add(-time.Hour)), true)

	require.Eventually(t, func() bool { return len(s.sim.Lists()) >= 5 }, 10*time.Second, 20*time.Millisecond)
	lists := s.sim.Lists()
	first := lists[0]
	require.WithinDuration(t, started.Add(-6*time.Hour), createdParam(t, first, "gte"), 5*time.Second, "the first listing starts give_up back")
	require.WithinDuration(t, started.Add(-after), createdParam(t, first, "lte"), 5*time.Second, "up to `after` ago")
	for i, q := range lists {
		require.Equal(t, "false", q.Get("delivery_success"), "list %d", i)
		var types []string
		for k, vs := range q {
			if strings.HasPrefix(k, "types[") {
				types = append(types, vs...)
			}
		}
		require.ElementsMatch(t, platform.StripeEventTypes, types, "list %d", i)
		if i > 0 {
			require.Equal(t, lists[i-1].Get("created[lte]"), q.Get("created[gte]"), "list %d asks from the checkpoint the one before stored", i)
		}
	}
	require.Eventually(t, func() bool {
		cp, ok := s.checkpoint(t)
		last := s.sim.Lists()
		return ok && cp.Equal(createdParam(t, last[len(last)-1], "lte"))
	}, 5*time.Second, 20*time.Millisecond, "the checkpoint is the end of the last window stored")
	require.Zero(t, s.Callbacks(t, "stripe"), "a delivered event is not fetched")
	require.Equal(t, payment.OrderUnpaid, s.Order(t, "ST-RC-DELIVERED").PaymentStatus)

	// The database refuses one event (a trigger, as a full disk would).
	_, err := s.St.SQL.Exec(`CREATE TRIGGER stripe_rc_refuse BEFORE INSERT ON callback_log FOR EACH ROW
BEGIN IF NEW.event_id = 'evt_1RcRefused' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'the disk is full'; END IF; END`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = s.St.SQL.Exec(`DROP TRIGGER IF EXISTS stripe_rc_refuse`) })
	created := time.Now().Truncate(time.Second)
	s.order(t, "ST-RC-REFUSED", 800, time.Minute)
	s.order(t, "ST-RC-OK", 900, time.Minute)
	s.sim.AddEvent(t, stripeEventAt("evt_1RcRefused", "payment_intent.succeeded", "ST-RC-REFUSED", "pi_1RcRefused", 800, created), false)
	s.sim.AddEvent(t, stripeEventAt("evt_1RcOk", "payment_intent.succeeded", "ST-RC-OK", "pi_1RcOk", 900, created), false)
	s.waitStatus(t, "ST-RC-OK", payment.OrderPaid) // stored though the event before it was refused
	st := s.state(t, "ST-RC-REFUSED", func(st store.ReconcileState) bool { return st.LastOutcome == reconcile.OutcomeStoreFailed })
	require.Contains(t, st.LastError, "evt_1RcRefused")
	require.Contains(t, st.LastError, "the disk is full")
	n := len(s.sim.Lists())
	require.Eventually(t, func() bool { return len(s.sim.Lists()) >= n+5 }, 10*time.Second, 20*time.Millisecond)
	cp, ok := s.checkpoint(t)
	require.True(t, ok)
	require.False(t, cp.After(created), "the checkpoint %s does not move past the event not stored (%s)", cp, created)
	require.Zero(t, s.events(t, "evt_1RcRefused"))

	_, err = s.St.SQL.Exec(`DROP TRIGGER stripe_rc_refuse`)
	require.NoError(t, err)
	s.waitStatus(t, "ST-RC-REFUSED", payment.OrderPaid)
	require.Equal(t, 1, s.events(t, "evt_1RcOk"), "listed again, stored once")
	require.Eventually(t, func() bool { cp, _ := s.checkpoint(t); return cp.After(created) }, 5*time.Second, 20*time.Millisecond,
		"then the checkpoint moves on")
}

// TestStripeReconcileSettings: the shipped file's stripe source is asked
// once STRIPE_API_KEY (or STRIPE_API_KEY_FILE) is set, at STRIPE_API_BASE.
func TestStripeReconcileSettings(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	stripeSource := func() (key, base string) {
		cfg, err := config.Load(path, kinds.Names())
		require.NoError(t, err)
		for _, s := range cfg.Sources {
			if s.Name == "stripe" {
				return s.Reconcile.APIKey, s.Reconcile.APIBase
			}
		}
		t.Fatal("no stripe source")
		return "", ""
	}
	key, base := stripeSource()
	require.Empty(t, key, "not asked until the key is set")
	require.Equal(t, "https://api.stripe.com", base)

	f := filepath.Join(t.TempDir(), "stripe_key")
	require.NoError(t, os.WriteFile(f, []byte(stripeAPIKey), 0o600))
	t.Setenv("STRIPE_API_KEY_FILE", f)
	t.Setenv("STRIPE_API_BASE", "http://127.0.0.1:12111")
	key, base = stripeSource()
	require.Equal(t, stripeAPIKey, key)
	require.Equal(t, "http://127.0.0.1:12111", base)
}

// TestStripeListedEventIsBound: an event from the list is read only as its
// webhook would be: this source's mode and account, an event object, and
// about the order asked when one is.
func TestStripeListedEventIsBound(t *testing.T) {
	p, err := platform.New("stripe", stripeConfig(stripeSecret))
	require.NoError(t, err)
	ans := p.(platform.Answerer)
	ev := stripeEventAt("evt_1Bound", "payment_intent.succeeded", "ST-BOUND", "pi_1Bound", 100, time.Now())
	cbs, err := ans.ReadAnswer("", ev)
	require.NoError(t, err)
	require.Len(t, cbs, 1)
	require.Equal(t, "evt_1Bound", cbs[0].EventID, "the event's own id: its webhook is a duplicate")
	_, err = ans.ReadAnswer("ST-BOUND", ev)
	require.NoError(t, err)
	_, err = ans.ReadAnswer("ST-OTHER", ev)
	require.ErrorContains(t, err, `not "ST-OTHER"`)

	edit := func(f func(map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(ev, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	_, err = ans.ReadAnswer("", edit(func(m map[string]any) { m["livemode"] = true }))
	require.ErrorIs(t, err, platform.ErrForeignMerchant)
	_, err = ans.ReadAnswer("", edit(func(m map[string]any) { m["account"] = "acct_1Other" }))
	require.ErrorIs(t, err, platform.ErrForeignMerchant)
	_, err = ans.ReadAnswer("", edit(func(m map[string]any) { m["object"] = "payment_intent" }))
	require.ErrorContains(t, err, "not an event")
}

// TestWorkerReconcileStripeOrder: `worker reconcile --order CODE` for an
// order paid through Stripe reads the events list first (from the
// checkpoint the scheduled run left), prints the event Stripe listed and
// what was stored, and the workers pay the order.
func TestWorkerReconcileStripeOrder(t *testing.T) {
	const after = time.Second
	// One scheduled run, at the start (the job starts at once; the next
	// run is an hour away): it lists nothing yet and stores a checkpoint.
	s := startStripeReconcile(t, reconcile.Config{After: after, Interval: time.Hour, Backoff: []time.Duration{time.Hour}})
	const order = "ST-RC-CLI"
	s.order(t, order, 1500, 5*time.Minute)
	var cp time.Time
	require.Eventually(t, func() bool { var ok bool; cp, ok = s.checkpoint(t); return ok }, 10*time.Second, 20*time.Millisecond)
	// An event the webhook missed, created since that checkpoint: only the
	// command's own listing can find it.
	ev := stripeEventAt("evt_1RcCli", "payment_intent.succeeded", order, "pi_1RcCli", 1500, cp)
	s.sim.AddEvent(t, ev, false)
	time.Sleep(2 * after) // listed up to `after` ago

	var out, errOut strings.Builder
	code := worker.ReconcileCommand(t.Context(), s.Cfg.WorkerSettings(), kinds.Names(), []string{"--order", order}, &out, &errOut, testenv.Logger(t, s.Cfg))
	require.Zero(t, code, "%s%s", out.String(), errOut.String())
	require.Contains(t, out.String(), "order ST-RC-CLI, payment source stripe, query 2: found", "%s", out.String())
	require.Contains(t, out.String(), `"id":"evt_1RcCli"`, "the event as Stripe listed it")
	require.Regexp(t, `stored as callback \d+ \(origin reconcile\)`, out.String())
	o := s.waitStatus(t, order, payment.OrderPaid)
	require.Equal(t, "pi_1RcCli", *o.PaymentNo)
	require.Equal(t, callback.OriginReconcile, s.Settled(t, "stripe", "evt_1RcCli").Origin)
}
