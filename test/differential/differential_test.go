// Package differential_test runs one generated sequence of callbacks
// through the real gateway and worker three ways, with worker.batch_size
// 64, with batch_size 1, and with every batch forced to fall back to one
// transaction per callback, and requires the same rows and notifications
// from all three. Each run's payment callbacks are then told, in the
// order they were processed and as their presets mapped them, to the
// independent reference model (refmodel_test.go, written from
// docs/guarantees.md alone), which must give every callback's outcome and
// notifications and every order's row; the carriers' rows are checked
// against the carrier rules of model_test.go. A handler whose batch and
// single paths disagree, or that disagrees with the documented rules,
// shows here.
//
// `make test` runs it with a fixed seed; `make fuzz` with random ones
// (FuzzDifferential). A failure prints the seed: CALLGATE_DIFF_SEED=<seed>
// go test ./test/differential/ runs that sequence again.
package differential_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/metrics"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/source"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// seedDefault is the sequence `make test` runs.
const seedDefault = 20261202

// stepsPerRun is how many requests a sequence sends.
const stepsPerRun = 200

// FuzzDifferential runs the three ways on the sequence of each seed.
func FuzzDifferential(f *testing.F) {
	f.Add(int64(seedDefault))
	if s := os.Getenv("CALLGATE_DIFF_SEED"); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f.Fatalf("CALLGATE_DIFF_SEED=%q is not a number", s)
		}
		f.Add(seed)
	}
	contract := testenv.MustContract(f)
	f.Fuzz(func(t *testing.T, seed int64) {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("differential: FAILED with seed %d; run it again with CALLGATE_DIFF_SEED=%d go test -run FuzzDifferential ./test/differential/", seed, seed)
			}
		})
		w := generate(seed, stepsPerRun)
		m := newModel(w.Orders)
		answers := make([]string, len(w.Steps))
		rounds := 1
		for i, s := range w.Steps {
			if s.Barrier {
				m.settle()
				rounds++
			}
			answers[i] = m.intake(s)
		}
		m.settle()
		t.Logf("seed %d: %d steps in %d rounds, %d accepted; table cells reached:\n%s", seed, len(w.Steps), rounds, len(m.accepted), m.cellCounts())
		if seed == seedDefault {
			require.Empty(t, m.missingCells(), "the default sequence reaches every cell of the rule table")
		}
		var snaps []snapshot
		for _, v := range []variant{{"batch_size=64", 64, false}, {"batch_size=1", 1, false}, {"every batch falls back", 64, true}} {
			got := run(t, w, m, answers, v)
			want := expected(m, got.ids)
			carriers := got.carriers()
			if d := cmp.Diff(want.carriers(), carriers); d != "" {
				t.Fatalf("seed %d, %s: the carriers' rows differ from the carrier rules (-model +%s):\n%s", seed, v.name, v.name, d)
			}
			if len(got.disagreements) > 0 {
				t.Fatalf("seed %d, %s: %d payment callbacks or orders differ from the independent model; the first:\n%s", seed, v.name,
					len(got.disagreements), strings.Join(got.disagreements[:min(5, len(got.disagreements))], "\n"))
			}
			t.Logf("%s: %d payment callbacks and %d orders as the independent model says", v.name, got.paymentsChecked, len(w.Orders))
			for _, msg := range got.messages {
				contract.Check(t, msg.routingKey, msg.payload)
			}
			snaps = append(snaps, got.snapshot)
		}
		for i := 1; i < len(snaps); i++ {
			if d := cmp.Diff(snaps[0], snaps[i]); d != "" {
				t.Fatalf("seed %d: batch_size=64 and run %d differ:\n%s", seed, i, d)
			}
		}
	})
}

// variant is one way of running the worker.
type variant struct {
	name      string
	batchSize int
	fallback  bool // every batch of more than one callback fails, and each then runs alone
}

// snapshot is everything a user relies on after a run, as text.
type snapshot struct {
	Callbacks []string // "source event_id: STATUS attempts=N error=..."
	Attempts  []string
	Orders    []string
	Facts     []string
	Shipments []string
	Events    []string
	Outbox    []string // "event: routing_key message_id payload"
}

// result is a run's snapshot, the log id of each accepted callback, and
// every notification it wrote.
type result struct {
	snapshot
	ids      map[string]int64 // source + "\x00" + event id -> log id
	messages []notification
	// disagreements are where the run and the independent model differ.
	disagreements   []string
	paymentsChecked int
}

// carriers is what of a snapshot the carrier rules say: the carrier
// sources' callbacks, attempts and notifications, the shipments and
// their events.
func (s snapshot) carriers() snapshot {
	keep := func(list []string) []string {
		var out []string
		for _, l := range list {
			if strings.HasPrefix(l, "shipdemo ") || strings.HasPrefix(l, "kuaidi100 ") {
				out = append(out, l)
			}
		}
		return out
	}
	return snapshot{Callbacks: keep(s.Callbacks), Attempts: keep(s.Attempts), Outbox: keep(s.Outbox), Shipments: s.Shipments, Events: s.Events}
}

type notification struct {
	routingKey string
	payload    []byte
}

// errPoison fails a batch so that its callbacks run one by one.
var errPoison = errors.New("poison: this batch falls back to one transaction per callback")

// fallback is a kind's handler whose batches always fail: the worker then
// rolls each batch back and runs every callback alone through Handle.
//
// It is also a late worker: a callback the model says waits until its
// order's grace runs out (late) first reaches the handler only after that
// grace, as on a loaded machine, where such a callback is FAILED at its
// first attempt instead of after retries. The snapshot must not tell the
// two apart: how many attempts a wait takes is up to timing.
type fallback struct {
	callback.BatchHandler
	late    map[string]bool // source + "\x00" + event_id
	grace   time.Duration
	delayed *sync.Map
}

func (f fallback) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	if _, again := f.delayed.LoadOrStore(cb.ID, true); !again && f.late[cb.Source+"\x00"+cb.EventID] {
		select {
		case <-time.After(time.Until(cb.ReceivedAt.Add(f.grace + 100*time.Millisecond))):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.BatchHandler.Handle(ctx, tx, cb, out)
}

func (f fallback) HandleBatch(ctx context.Context, tx *gorm.DB, cbs []*callback.Log, outs []callback.Outbox) []error {
	return callback.FailBatch(make([]error, len(cbs)), errPoison)
}

// retryFast is the payment sources' retry policy here: an event that
// waits is tried again 150 to 300 ms later, long after the event that
// follows it in its round, and spends its budget in about a second.
var retryFast = source.Retry{MaxAttempts: 4, Initial: 300 * time.Millisecond, Max: 300 * time.Millisecond}

// run sends the sequence, round by round, through a fresh gateway and a
// worker of variant v, waiting at each barrier until everything sent is
// settled, and takes the snapshot.
func run(t *testing.T, w world, m *model, answers []string, v variant) result {
	k := testenv.RSAKeys()[0]
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Worker.BatchSize = v.batchSize
		// An event of an order that does not exist waits this long
		// (whatever its retry budget) before it is FAILED.
		c.Worker.OrderGrace = 2 * time.Second
		c.Scheduler.Compensation.Interval = 100 * time.Millisecond
		c.Scheduler.OutboxRelay.Interval = 200 * time.Millisecond
		for i := range c.Sources {
			if c.Sources[i].Kind == callback.KindPayment {
				c.Sources[i].Retry = retryFast
			}
		}
	},
		testenv.WithPlatform("stripe", platform.Config{Secrets: []string{stripeSecret}, Livemode: "true"}),
		testenv.WithPlatform("adyen", platform.Config{Secrets: []string{adyenKey}, MerchantAccounts: adyenAccount, Livemode: "false"}),
		testenv.WithPlatform("shopify", platform.Config{Secrets: []string{shopifySecret}, ShopDomains: shop}),
		testenv.WithPlatform("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: testenv.RSAPublicKeyPEM(k)}},
			AppID: alipayApp, SellerID: alipaySeller}),
		testenv.WithPlatform("wechatpay", platform.Config{APIv3Key: wechatKey, MchID: wechatMch, AppID: wechatApp,
			PublicKeys: []platform.PublicKey{{ID: wechatKeyID, Key: testenv.RSAPublicKeyPEM(k)}}}),
		testenv.WithPlatform("kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}}),
	)
	st := testenv.Store(t, cfg)
	for _, o := range w.Orders {
		_, err := st.SQL.Exec(`INSERT INTO orders (order_code, user_id, amount, currency) VALUES (?, ?, ?, ?)`, o.Code, o.User, o.Amount, o.Currency)
		require.NoError(t, err)
	}
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	mx := metrics.New("worker")
	opts := worker.Options{Metrics: mx}
	if v.fallback {
		opts.Registry = callback.NewRegistry()
		late := map[string]bool{}
		for key, o := range m.outcomes {
			if o.Status == "FAILED" && (o.Waited || strings.HasPrefix(o.LastError, payment.ErrOrderNotFound.Error())) {
				late[key] = true
			}
		}
		delayed := &sync.Map{}
		for _, kind := range kinds.Names() {
			h, _ := kinds.Registry(cfg.WorkerSettings()).Handler(kind)
			opts.Registry.Register(kind, fallback{h.(callback.BatchHandler), late, cfg.Worker.OrderGrace, delayed})
		}
	}
	testenv.StartWorker(t, cfg, opts)
	paydemo, shipdemo := testenv.Secret(t, cfg, "paydemo"), testenv.Secret(t, cfg, "shipdemo")
	accepted := 0
	settled := func(what string) {
		ok := assertEventually(func() bool {
			var total, pending int
			if err := st.SQL.QueryRow(`SELECT COUNT(*), COALESCE(SUM(status = 'PENDING'), 0) FROM callback_log`).Scan(&total, &pending); err != nil {
				return false
			}
			return total == accepted && pending == 0
		}, 90*time.Second)
		if !ok {
			var stuck []string
			each(t, st.SQL, `SELECT id, source, event_id, attempts, COALESCE(last_error, ''), COALESCE(next_attempt_at, '') FROM callback_log
				WHERE status = 'PENDING' ORDER BY id LIMIT 10`, func(rows *sql.Rows) {
				var id int64
				var src, ev, lastErr, next string
				var n int
				require.NoError(t, rows.Scan(&id, &src, &ev, &n, &lastErr, &next))
				stuck = append(stuck, fmt.Sprintf("%d %s %s attempts=%d next=%s error=%s", id, src, ev, n, next, lastErr))
			})
			t.Fatalf("%s: every accepted callback settles (%s); still PENDING:\n%s", v.name, what, strings.Join(stuck, "\n"))
		}
	}
	for i, s := range w.Steps {
		if s.Barrier {
			settled(fmt.Sprintf("before step %d", i))
		}
		req := render(s, k, paydemo, shipdemo, time.Now())
		a := testenv.PostRaw(t, gw.URL, req.Source, req.Body, req.Header)
		switch answers[i] {
		case answerForeign:
			require.Equal(t, http.StatusForbidden, a.Status, "%s step %d (%s %s): %s", v.name, i, req.Source, s.eventID(), a.Body)
		default:
			require.True(t, a.Status >= 200 && a.Status < 300, "%s step %d (%s %s): %d %s", v.name, i, req.Source, s.eventID(), a.Status, a.Body)
		}
		if answers[i] == answerAccepted {
			accepted++
		}
	}
	settled("at the end")
	if v.fallback {
		require.Positive(t, testutil.ToFloat64(mx.BatchFallbacks.WithLabelValues("handler")), "batches fell back")
	}
	r := snap(t, st.SQL, m)
	currencies := map[string]string{}
	for _, src := range cfg.Sources {
		if src.PaymentCurrency != "" {
			currencies[src.Name] = src.PaymentCurrency
		}
	}
	r.disagreements, r.paymentsChecked = againstModel(t, st.SQL, w.Orders, currencies)
	return r
}

// againstModel tells the run's payment callbacks, in the order they were
// processed (their last attempt), as their presets mapped them, to the
// independent model, and lists where the run differs: a callback's
// status or notifications, an order's row.
func againstModel(t *testing.T, db *sql.DB, orders []order, currencies map[string]string) ([]string, int) {
	t.Helper()
	var ros []refOrder
	for _, o := range orders {
		ros = append(ros, refOrder(o))
	}
	rm := newRefModel(ros, currencies)
	outbox := map[int64][]string{}
	each(t, db, `SELECT callback_log_id, routing_key, payload FROM outbox ORDER BY callback_log_id, id`, func(rows *sql.Rows) {
		var id int64
		var rk, payload string
		require.NoError(t, rows.Scan(&id, &rk, &payload))
		outbox[id] = append(outbox[id], rk+" "+canonicalJSON(t, []byte(payload)))
	})
	var diffs []string
	checked := 0
	each(t, db, `SELECT l.id, l.source, l.received_at, COALESCE(l.normalized, l.payload), l.status, COALESCE(l.last_error, ''),
			(SELECT MAX(a.id) FROM callback_attempt a WHERE a.log_id = l.id) AS last
		FROM callback_log l WHERE l.kind = 'payment' ORDER BY last, l.id`, func(rows *sql.Rows) {
		var id int64
		var src, status, lastErr string
		var received time.Time
		var body []byte
		var last sql.NullInt64
		require.NoError(t, rows.Scan(&id, &src, &received, &body, &status, &lastErr, &last))
		if _, unreadable := callback.UnreadableReason(body); unreadable {
			return
		}
		var ev callback.PaymentEvent
		if err := callback.DecodePayload(body, &ev); err != nil || ev.Ignored != "" || payment.Validate(ev) != nil {
			return // unreadable (poison) or of no effect: no rule of the model's
		}
		checked++
		out := rm.Apply(refEvent{Source: src, LogID: id, ReceivedAt: received.UTC(), Type: ev.Type, OrderCode: ev.OrderCode,
			PaymentNo: ev.PaymentNo, RefundNo: ev.RefundNo, DisputeID: ev.DisputeID, Amount: ev.Amount, RefundedTotal: ev.RefundedTotal,
			Currency: ev.Currency, Status: ev.Status, Reason: ev.Reason, PaidAt: ev.PaidAt, OccurredAt: ev.OccurredAt, InitiatedAt: ev.InitiatedAt})
		var want []string
		for _, msg := range out.Messages {
			b, err := json.Marshal(msg.Payload)
			require.NoError(t, err)
			want = append(want, msg.RoutingKey+" "+canonicalJSON(t, b))
		}
		got := outbox[id]
		if out.Status != status || (status == "FAILED" && !strings.HasPrefix(lastErr, out.Reason)) || !slices.Equal(want, got) {
			diffs = append(diffs, fmt.Sprintf("callback %d (%s) %s:\n  model: %s %s %q\n  run:   %s %s %q", id, src, body,
				out.Status, out.Reason, want, status, lastErr, got))
		}
	})
	eachOrder(t, db, func(code string, got refOrderRow) {
		row := rm.Row(code)
		if row.PaidAt != nil {
			at := row.PaidAt.UTC().Truncate(time.Microsecond)
			row.PaidAt = &at
		}
		if d := cmp.Diff(row, got); d != "" {
			diffs = append(diffs, fmt.Sprintf("order %s (-model +run):\n%s", code, d))
		}
	})
	return diffs, checked
}

// canonicalJSON is a JSON object with its keys sorted and numbers as
// written.
func canonicalJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&v))
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

// assertEventually polls cond until it holds or wait has passed.
func assertEventually(cond func() bool, wait time.Duration) bool {
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// each runs query and calls scan for every row.
func each(t *testing.T, db *sql.DB, query string, scan func(*sql.Rows)) {
	t.Helper()
	rows, err := db.Query(query)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		scan(rows)
	}
	require.NoError(t, rows.Err())
}

// eachOrder calls f with each orders row in code order, as a model row
// (paid_at in UTC).
func eachOrder(t *testing.T, db *sql.DB, f func(code string, o refOrderRow)) {
	t.Helper()
	each(t, db, `SELECT order_code, payment_status, COALESCE(payment_no, ''), paid_at, refunded_amount, chargeback_amount,
			COALESCE(dispute_status, ''), warehouse_cancelled FROM orders ORDER BY order_code`, func(rows *sql.Rows) {
		var code string
		var o refOrderRow
		var paidAt sql.NullTime
		require.NoError(t, rows.Scan(&code, &o.Status, &o.PaymentNo, &paidAt, &o.Refunded, &o.Chargeback, &o.DisputeStatus, &o.WarehouseCancelled))
		if paidAt.Valid {
			at := paidAt.Time.UTC()
			o.PaidAt = &at
		}
		f(code, o)
	})
}

// snap reads what a run left.
func snap(t *testing.T, db *sql.DB, m *model) result {
	t.Helper()
	r := result{ids: map[string]int64{}}
	names := map[int64]string{}
	waited := map[int64]bool{}
	each(t, db, `SELECT id, source, event_id, status, attempts, COALESCE(last_error, '') FROM callback_log ORDER BY id`, func(rows *sql.Rows) {
		var id int64
		var src, ev, status, lastErr string
		var attempts int
		require.NoError(t, rows.Scan(&id, &src, &ev, &status, &attempts, &lastErr))
		r.ids[src+"\x00"+ev] = id
		names[id] = src + " " + ev
		n := strconv.Itoa(attempts)
		ranOut := status == "FAILED" && (m.outcomes[src+"\x00"+ev].Waited || strings.HasPrefix(lastErr, payment.ErrOrderNotFound.Error()))
		if attempts > 1 || ranOut {
			// How many attempts waited (for its order, or for a payment
			// recorded after it) is up to timing; a wait that runs out
			// (its order's grace, its retry budget) may have run out
			// before the first attempt, when the worker came to it late
			// (a loaded machine, the fallback variant's late worker).
			waited[id] = true
			n = "waited"
		}
		r.Callbacks = append(r.Callbacks, fmt.Sprintf("%s %s: %s attempts=%s error=%s", src, ev, status, n, lastErr))
	})
	attempts := map[int64][]string{}
	each(t, db, `SELECT log_id, attempt, outcome, COALESCE(error, ''), COALESCE(note, '') FROM callback_attempt ORDER BY log_id, attempt`, func(rows *sql.Rows) {
		var id int64
		var n int
		var outcome, e, note string
		require.NoError(t, rows.Scan(&id, &n, &outcome, &e, &note))
		attempts[id] = append(attempts[id], fmt.Sprintf("%s error=%s note=%s", outcome, e, note))
	})
	for _, id := range slices.Sorted(maps.Keys(attempts)) {
		list := attempts[id]
		if waited[id] {
			// Every attempt but the last waited (a retry); the last is the
			// outcome.
			for i, a := range list[:len(list)-1] {
				if !strings.HasPrefix(a, callback.OutcomeRetry+" ") {
					r.Attempts = append(r.Attempts, fmt.Sprintf("%s #%d: %s (a waiting attempt that did not wait)", names[id], i+1, a))
				}
			}
			r.Attempts = append(r.Attempts, fmt.Sprintf("%s #last: %s", names[id], list[len(list)-1]))
			continue
		}
		for i, a := range list {
			r.Attempts = append(r.Attempts, fmt.Sprintf("%s #%d: %s", names[id], i+1, a))
		}
	}
	eachOrder(t, db, func(code string, o refOrderRow) {
		at := ""
		if o.PaidAt != nil {
			at = o.PaidAt.Format(time.RFC3339Nano)
		}
		r.Orders = append(r.Orders, fmt.Sprintf("%s %s %s %s refunded=%d chargeback=%d dispute=%s cancelled=%t", code, o.Status, o.PaymentNo, at,
			o.Refunded, o.Chargeback, o.DisputeStatus, o.WarehouseCancelled))
	})
	// The facts, without when callgate received them (each run receives
	// at its own time): what was reported, and the platform's time.
	each(t, db, `SELECT order_code, fact_key, kind, ref, payment_no, status, amount, currency, COALESCE(reason, ''), occurred_at,
			initiated_at FROM payment_facts ORDER BY order_code, fact_key`, func(rows *sql.Rows) {
		var code, key, kind, ref, payment, status, currency, reason string
		var amount int64
		var occurred, initiated sql.NullTime
		require.NoError(t, rows.Scan(&code, &key, &kind, &ref, &payment, &status, &amount, &currency, &reason, &occurred, &initiated))
		at := func(n sql.NullTime) string {
			if !n.Valid {
				return "-"
			}
			return n.Time.UTC().Format(time.RFC3339Nano)
		}
		r.Facts = append(r.Facts, fmt.Sprintf("%s %s %s %s of=%s %s %d %s %q at=%s began=%s", code, key, kind, ref, payment, status, amount, currency,
			reason, at(occurred), at(initiated)))
	})
	each(t, db, `SELECT waybill_no, COALESCE(order_code, ''), status, last_seq FROM shipments ORDER BY waybill_no`, func(rows *sql.Rows) {
		var wb, code, status string
		var seq int64
		require.NoError(t, rows.Scan(&wb, &code, &status, &seq))
		r.Shipments = append(r.Shipments, fmt.Sprintf("%s order=%s %s seq=%d", wb, code, status, seq))
	})
	each(t, db, `SELECT waybill_no, seq, status, location, occurred_at FROM shipment_events ORDER BY waybill_no, seq`, func(rows *sql.Rows) {
		var wb, status, loc string
		var seq int64
		var at time.Time
		require.NoError(t, rows.Scan(&wb, &seq, &status, &loc, &at))
		r.Events = append(r.Events, fmt.Sprintf("%s:%d %s|%s|%s", wb, seq, status, loc, at.UTC().Format(time.RFC3339)))
	})
	each(t, db, `SELECT callback_log_id, routing_key, message_id, payload FROM outbox ORDER BY callback_log_id, id`, func(rows *sql.Rows) {
		var id int64
		var rk, msgID, payload string
		require.NoError(t, rows.Scan(&id, &rk, &msgID, &payload))
		r.Outbox = append(r.Outbox, fmt.Sprintf("%s: %s %s %s", names[id], rk, msgID, payload))
		r.messages = append(r.messages, notification{rk, []byte(payload)})
	})
	return r
}

// expected is the snapshot the model predicts, given the log ids the run
// gave the accepted callbacks (the model cannot know the database's ids,
// and message ids are made from them).
func expected(m *model, ids map[string]int64) snapshot {
	var s snapshot
	type acc struct {
		key string
		id  int64
	}
	var order []acc
	for _, key := range m.accepted {
		order = append(order, acc{key, ids[key]})
	}
	slices.SortFunc(order, func(a, b acc) int { return int(a.id - b.id) })
	for _, a := range order {
		o := m.outcomes[a.key]
		name := strings.Replace(a.key, "\x00", " ", 1)
		attempts := "1"
		if o.Waited {
			attempts = "waited"
		}
		s.Callbacks = append(s.Callbacks, fmt.Sprintf("%s: %s attempts=%s error=%s", name, o.Status, attempts, o.LastError))
		outcome := callback.OutcomeSuccess
		if o.Status == "FAILED" {
			outcome = callback.OutcomeFailed
		}
		n := "#1"
		if o.Waited {
			n = "#last"
		}
		s.Attempts = append(s.Attempts, fmt.Sprintf("%s %s: %s error=%s note=%s", name, n, outcome, o.LastError, o.Note))
		seen := map[string]int{}
		for _, msg := range o.Messages {
			rk, payload, _ := strings.Cut(msg, " ")
			id := fmt.Sprintf("cb%d.%s", a.id, rk)
			if k := seen[rk]; k > 0 {
				id += "." + strconv.Itoa(k)
			}
			seen[rk]++
			s.Outbox = append(s.Outbox, fmt.Sprintf("%s: %s %s %s", name, rk, id, payload))
		}
	}
	for _, code := range slices.Sorted(maps.Keys(m.orders)) {
		o := m.orders[code]
		s.Orders = append(s.Orders, fmt.Sprintf("%s %s %s %s refunded=%d dispute=%s", code, o.Status, o.PaymentNo, o.PaidAt, o.Refunded, o.Dispute))
	}
	for _, wb := range slices.Sorted(maps.Keys(m.shipments)) {
		sh := m.shipments[wb]
		s.Shipments = append(s.Shipments, fmt.Sprintf("%s order=%s %s seq=%d", wb, sh.Order, sh.Status, sh.LastSeq))
	}
	keys := slices.SortedFunc(maps.Keys(m.events), func(a, b string) int {
		wa, sa, _ := strings.Cut(a, ":")
		wb, sb, _ := strings.Cut(b, ":")
		if c := strings.Compare(wa, wb); c != 0 {
			return c
		}
		na, _ := strconv.Atoi(sa)
		nb, _ := strconv.Atoi(sb)
		return na - nb
	})
	for _, k := range keys {
		s.Events = append(s.Events, k+" "+m.events[k])
	}
	return s
}
