// Package differential_test runs one generated sequence of callbacks
// through the real gateway and worker three ways, with worker.batch_size
// 64, with batch_size 1, and with every batch forced to fall back to one
// transaction per callback, and requires the same rows and notifications
// from all three, and from a small reference model of the rules
// (model_test.go). A handler whose batch and single paths disagree, or a
// preset and a configured source that decide differently, shows here.
//
// `make test` runs it with a fixed seed; `make fuzz` with random ones
// (FuzzDifferential). A failure prints the seed: CALLGATE_DIFF_SEED=<seed>
// go test ./test/differential/ runs that sequence again.
package differential_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
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
			if d := cmp.Diff(want, got.snapshot); d != "" {
				t.Fatalf("seed %d, %s: the rows differ from the reference model (-model +%s):\n%s", seed, v.name, v.name, d)
			}
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
	Payments  []string
	Refunds   []string
	Disputes  []string
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
}

type notification struct {
	routingKey string
	payload    []byte
}

// errPoison fails a batch so that its callbacks run one by one.
var errPoison = errors.New("poison: this batch falls back to one transaction per callback")

// fallback is a kind's handler whose batches always fail: the worker then
// rolls each batch back and runs every callback alone through Handle.
type fallback struct{ callback.BatchHandler }

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
		for _, kind := range kinds.Names() {
			h, _ := kinds.Registry(cfg.WorkerSettings()).Handler(kind)
			opts.Registry.Register(kind, fallback{h.(callback.BatchHandler)})
		}
	}
	testenv.StartWorker(t, cfg, opts)
	paydemo, shipdemo := testenv.Secret(t, cfg, "paydemo"), testenv.Secret(t, cfg, "shipdemo")
	accepted := 0
	settled := func(what string) {
		require.Eventually(t, func() bool {
			var total, pending int
			if err := st.SQL.QueryRow(`SELECT COUNT(*), COALESCE(SUM(status = 'PENDING'), 0) FROM callback_log`).Scan(&total, &pending); err != nil {
				return false
			}
			return total == accepted && pending == 0
		}, 90*time.Second, 20*time.Millisecond, "%s: every accepted callback settles (%s)", v.name, what)
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
	return snap(t, st.SQL, m)
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
		if o, ok := m.outcomes[src+"\x00"+ev]; ok && o.Waited {
			// How many attempts waited is up to timing: at least two, or
			// the whole budget for one that never stopped waiting.
			waited[id] = true
			n = "waited"
			if attempts < 2 {
				n = fmt.Sprintf("waited(only %d)", attempts)
			}
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
	each(t, db, `SELECT order_code, payment_status, COALESCE(payment_no, ''), paid_at, refunded_amount, COALESCE(dispute_status, '') FROM orders ORDER BY order_code`, func(rows *sql.Rows) {
		var code, status, no, dispute string
		var paidAt sql.NullTime
		var refunded int64
		require.NoError(t, rows.Scan(&code, &status, &no, &paidAt, &refunded, &dispute))
		at := ""
		if paidAt.Valid {
			at = paidAt.Time.UTC().Format(time.RFC3339)
			if o := m.orders[code]; o != nil && o.PaidAt == "received" {
				at = "received"
			}
		}
		r.Orders = append(r.Orders, fmt.Sprintf("%s %s %s %s refunded=%d dispute=%s", code, status, no, at, refunded, dispute))
	})
	each(t, db, `SELECT order_code, payment_no, status, paying FROM payments ORDER BY order_code, payment_no`, func(rows *sql.Rows) {
		var code, no, status string
		var paying bool
		require.NoError(t, rows.Scan(&code, &no, &status, &paying))
		r.Payments = append(r.Payments, fmt.Sprintf("%s %s %s paying=%t", code, no, status, paying))
	})
	each(t, db, `SELECT order_code, refund_no, status, amount, counted, matched FROM refunds ORDER BY order_code, refund_no`, func(rows *sql.Rows) {
		var code, no, status string
		var amount, counted, matched int64
		require.NoError(t, rows.Scan(&code, &no, &status, &amount, &counted, &matched))
		r.Refunds = append(r.Refunds, fmt.Sprintf("%s %s %s amount=%d counted=%d matched=%d", code, no, status, amount, counted, matched))
	})
	each(t, db, `SELECT order_code, dispute_id, status, amount FROM disputes ORDER BY order_code, dispute_id`, func(rows *sql.Rows) {
		var code, id, status string
		var amount int64
		require.NoError(t, rows.Scan(&code, &id, &status, &amount))
		r.Disputes = append(r.Disputes, fmt.Sprintf("%s %s %s amount=%d", code, id, status, amount))
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
		for _, no := range slices.Sorted(maps.Keys(o.payments)) {
			p := o.payments[no]
			s.Payments = append(s.Payments, fmt.Sprintf("%s %s %s paying=%t", code, no, p.Status, p.Paying))
		}
		for _, no := range slices.Sorted(maps.Keys(o.refunds)) {
			r := o.refunds[no]
			s.Refunds = append(s.Refunds, fmt.Sprintf("%s %s %s amount=%d counted=%d matched=%d", code, no, r.Status, r.Amount, r.Counted, r.Matched))
		}
		for _, id := range slices.Sorted(maps.Keys(o.disputes)) {
			d := o.disputes[id]
			s.Disputes = append(s.Disputes, fmt.Sprintf("%s %s %s amount=%d", code, id, d.Status, d.Amount))
		}
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
