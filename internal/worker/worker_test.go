package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/logistics"
	"callgate/internal/outbox"
	"callgate/internal/payment"
	"callgate/internal/source"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// fast makes retries and scans quick enough for tests.
func fast(c *config.Config) {
	for i := range c.Sources {
		c.Sources[i].Retry = source.Retry{MaxAttempts: 8, Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	c.Scheduler.Compensation.Interval = 100 * time.Millisecond
	c.Scheduler.OutboxRelay.Interval = 100 * time.Millisecond
	c.Scheduler.OutboxRelay.MinAge = 300 * time.Millisecond
	c.Worker.ShutdownTimeout = 5 * time.Second
}

type env struct {
	cfg        *config.Config
	st         *testenv.TestStore
	gw         *testenv.Gateway
	downstream *testenv.Queue
}

func setup(t *testing.T, opts worker.Options, mutate ...func(*config.Config)) *env {
	t.Helper()
	cfg := testenv.Config(t, append([]func(*config.Config){fast}, mutate...)...)
	e := &env{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGateway(t, cfg)
	e.gw.WaitReady(t)
	e.downstream = testenv.Downstream(t, cfg)
	testenv.StartWorker(t, cfg, opts)
	return e
}

func (e *env) pay(t *testing.T, order string, amount int64, paymentNo string) int64 {
	t.Helper()
	body := testenv.PaymentBody(order, paymentNo, amount)
	a := testenv.Post(t, e.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, e.cfg, "msg_"+paymentNo, time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	return a.LogID
}

func (e *env) ship(t *testing.T, waybill, order string, seq int, status string) int64 {
	t.Helper()
	body := testenv.ShipmentBody(waybill, order, seq, status)
	a := testenv.Post(t, e.gw.URL, "shipdemo", body, testenv.ShipdemoHeaders(t, e.cfg, body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	return a.LogID
}

func (e *env) row(t *testing.T, id int64) *callback.Log {
	t.Helper()
	l, err := e.st.GetCallback(context.Background(), id)
	require.NoError(t, err)
	return l
}

func (e *env) waitStatus(t *testing.T, id int64, want callback.Status) *callback.Log {
	t.Helper()
	var l *callback.Log
	require.Eventually(t, func() bool {
		l = e.row(t, id)
		return l.Status == want
	}, 20*time.Second, 20*time.Millisecond, "callback %d never became %s", id, want)
	return l
}

func (e *env) attempts(t *testing.T, id int64) []callback.Attempt {
	t.Helper()
	var out []callback.Attempt
	require.NoError(t, e.st.DB.Where("log_id = ?", id).Order("attempt").Find(&out).Error)
	return out
}

func (e *env) order(t *testing.T, code string) payment.Order {
	t.Helper()
	var o payment.Order
	require.NoError(t, e.st.DB.Take(&o, "order_code = ?", code).Error)
	return o
}

func (e *env) outboxRows(t *testing.T, logID int64) []outbox.Row {
	t.Helper()
	var rows []outbox.Row
	require.NoError(t, e.st.DB.Where("callback_log_id = ?", logID).Order("id").Find(&rows).Error)
	return rows
}

// replay does what an operator's replay does: PENDING again, announced.
func (e *env) replay(t *testing.T, id int64) {
	t.Helper()
	require.NoError(t, e.st.DB.Model(&callback.Log{}).Where("id = ?", id).
		Updates(map[string]any{"status": "PENDING", "next_attempt_at": time.Now().Add(time.Hour)}).Error)
	testenv.Publish(t, e.cfg, "payment", fmt.Sprintf(`{"log_id":%d}`, id))
}

func TestPaymentEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t, worker.Options{})
	order := testenv.CreateOrders(t, e.cfg, "e2e", 1)[0]
	id := e.pay(t, order, 1000, "PAY-E2E")

	row := e.waitStatus(t, id, callback.StatusSuccess)
	require.Equal(t, 1, row.Attempts)
	require.NotNil(t, row.ProcessedAt)
	o := e.order(t, order)
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Equal(t, "PAY-E2E", *o.PaymentNo)
	require.NotNil(t, o.PaidAt)
	att := e.attempts(t, id)
	require.Len(t, att, 1)
	require.Equal(t, callback.OutcomeSuccess, att[0].Outcome)
	require.NotEmpty(t, att[0].WorkerID)

	msgs := e.downstream.Drain(2 * time.Second)
	require.Len(t, msgs, 2, "warehouse.ship and points.add, each exactly once")
	byKey := map[string]map[string]any{}
	for _, m := range msgs {
		var p map[string]any
		require.NoError(t, json.Unmarshal(m.Body, &p))
		byKey[m.RoutingKey] = p
		require.Equal(t, "cb"+strconv.FormatInt(id, 10)+"."+m.RoutingKey, m.MessageId, "stable message id")
		require.Equal(t, strconv.FormatInt(id, 10), m.CorrelationId)
		require.EqualValues(t, 2, m.DeliveryMode)
		tp, _ := m.Headers["traceparent"].(string)
		require.Contains(t, tp, row.TraceID, "the platform's trace reaches the downstream message")
	}
	require.Equal(t, map[string]any{"orderCode": order}, byKey[payment.RoutingWarehouseShip])
	require.Equal(t, map[string]any{"orderCode": order, "userId": float64(100), "amount": float64(1000), "currency": "CNY"}, byKey[payment.RoutingPointsAdd])
	for _, r := range e.outboxRows(t, id) {
		require.Equal(t, outbox.StatusSent, r.Status)
		require.NotNil(t, r.SentAt)
	}
}

func TestRedeliveryAndReplayHaveOneSetOfEffects(t *testing.T) {
	t.Parallel()
	e := setup(t, worker.Options{})
	order := testenv.CreateOrders(t, e.cfg, "dup", 1)[0]
	id := e.pay(t, order, 1000, "PAY-DUP")
	e.waitStatus(t, id, callback.StatusSuccess)

	// The broker delivers the same announcement three more times.
	for range 3 {
		testenv.Publish(t, e.cfg, "payment", fmt.Sprintf(`{"log_id":%d}`, id))
	}
	// An operator replays it twice.
	for range 2 {
		e.replay(t, id)
		e.waitStatus(t, id, callback.StatusSuccess)
	}
	msgs := e.downstream.Drain(2 * time.Second)
	require.Len(t, msgs, 2, "one set of downstream messages")
	require.Len(t, e.outboxRows(t, id), 2)
	o := e.order(t, order)
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Equal(t, "PAY-DUP", *o.PaymentNo)
	// Redeliveries of a settled callback are skipped without an attempt;
	// each replay is one more (idempotent) attempt.
	require.Len(t, e.attempts(t, id), 3)
}

// flaky fails the first n attempts of every callback with a retryable error.
func flaky(n int) worker.Options {
	var mu sync.Mutex
	seen := map[int64]int{}
	reg := callback.NewRegistry()
	reg.Register(callback.KindPayment, callback.HandlerFunc(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		mu.Lock()
		seen[cb.ID]++
		k := seen[cb.ID]
		mu.Unlock()
		if k <= n {
			return fmt.Errorf("warehouse API timeout (try %d)", k)
		}
		return demoPayments.Handle(ctx, tx, cb, out)
	}))
	reg.Register(callback.KindLogistics, logistics.Handler{})
	return worker.Options{Registry: reg}
}

func TestRetryableFailureTwiceThenSuccess(t *testing.T) {
	t.Parallel()
	e := setup(t, flaky(2))
	order := testenv.CreateOrders(t, e.cfg, "retry", 1)[0]
	id := e.pay(t, order, 1000, "PAY-RETRY")

	row := e.waitStatus(t, id, callback.StatusSuccess)
	require.Equal(t, 3, row.Attempts)
	require.Nil(t, row.LastError, "cleared on success")
	att := e.attempts(t, id)
	require.Len(t, att, 3)
	require.Equal(t, callback.OutcomeRetry, att[0].Outcome)
	require.Contains(t, *att[0].Error, "warehouse API timeout (try 1)")
	require.Equal(t, callback.OutcomeRetry, att[1].Outcome)
	require.Equal(t, callback.OutcomeSuccess, att[2].Outcome)
	require.True(t, att[1].StartedAt.After(att[0].FinishedAt.Add(20*time.Millisecond)), "backoff between attempts")
	require.Len(t, e.downstream.Drain(2*time.Second), 2, "one set of downstream messages")
}

func TestRetriesExhaustedEndFailed(t *testing.T) {
	t.Parallel()
	e := setup(t, flaky(100), func(c *config.Config) {
		c.Sources[0].Retry.MaxAttempts = 3
	})
	order := testenv.CreateOrders(t, e.cfg, "exh", 1)[0]
	id := e.pay(t, order, 1000, "PAY-EXH")
	row := e.waitStatus(t, id, callback.StatusFailed)
	require.Equal(t, 3, row.Attempts)
	require.Contains(t, *row.LastError, "try 3")
	att := e.attempts(t, id)
	require.Len(t, att, 3)
	require.Equal(t, callback.OutcomeFailed, att[2].Outcome)
	require.Equal(t, payment.OrderUnpaid, e.order(t, order).PaymentStatus)
}

func TestPermanentFailuresAndPoison(t *testing.T) {
	t.Parallel()
	reg := callback.NewRegistry()
	reg.Register(callback.KindPayment, demoPayments)
	reg.Register(callback.KindLogistics, callback.HandlerFunc(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		if strings.Contains(string(cb.Payload), "BOOM") {
			panic("carrier sent something we never expected")
		}
		return logistics.Handler{}.Handle(ctx, tx, cb, out)
	}))
	e := setup(t, worker.Options{Registry: reg})
	orders := testenv.CreateOrders(t, e.cfg, "perm", 3)

	cases := []struct {
		name string
		id   int64
		want string
	}{
		{"order not found", e.pay(t, "ORD-NOPE", 1000, "PAY-P1"), "order not found"},
		{"payload that can never parse", func() int64 {
			// The intake refuses it now (a 400 naming the field); a row
			// stored before it did is still the worker's to fail.
			body := []byte(`{"orderCode":"` + orders[2] + `","paymentNo":"PAY-P5","amount":"lots"}`)
			a := testenv.Post(t, e.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, e.cfg, "msg_p5", time.Now(), body))
			require.Equal(t, http.StatusBadRequest, a.Status)
			res, err := e.st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: "msg_p5",
				BusinessKey: orders[2], Payload: body, ReceivedAt: time.Now()})
			require.NoError(t, err)
			testenv.Publish(t, e.cfg, "payment", fmt.Sprintf(`{"log_id":%d}`, res.ID))
			return res.ID
		}(), `invalid payload: field "amount": want an integer, got a string`},
		{"handler panic", e.ship(t, "WB-BOOM", "BOOM", 1, "PICKED_UP"), "handler panic: carrier sent something we never expected"},
	}
	for _, tc := range cases {
		row := e.waitStatus(t, tc.id, callback.StatusFailed)
		require.Equal(t, 1, row.Attempts, tc.name)
		require.Contains(t, *row.LastError, tc.want, tc.name)
		att := e.attempts(t, tc.id)
		require.Len(t, att, 1, tc.name)
		require.Equal(t, callback.OutcomeFailed, att[0].Outcome, tc.name)
	}
	// A mismatch and a second payment are money for a person, not failed
	// callbacks: SUCCESS, the order unchanged, payment.exception published.
	for _, tc := range []struct {
		name string
		id   int64
		note string
	}{
		{"amount mismatch", e.pay(t, orders[0], 999, "PAY-P2"), "exception amount_mismatch: payment 999, order 1000 (CNY minor units)"},
		{"paid by another payment", func() int64 {
			first := e.pay(t, orders[1], 1001, "PAY-P3")
			e.waitStatus(t, first, callback.StatusSuccess)
			return e.pay(t, orders[1], 1001, "PAY-P4")
		}(), "exception paid_by_another: order already paid by payment PAY-P3"},
	} {
		e.waitStatus(t, tc.id, callback.StatusSuccess)
		att := e.attempts(t, tc.id)
		require.Len(t, att, 1, tc.name)
		require.NotNil(t, att[0].Note, tc.name)
		require.Equal(t, tc.note, *att[0].Note, tc.name)
	}
	require.Equal(t, payment.OrderUnpaid, e.order(t, orders[0]).PaymentStatus)
	// The worker keeps running after a panic.
	ok := e.ship(t, "WB-OK", "ORD-X", 1, "PICKED_UP")
	e.waitStatus(t, ok, callback.StatusSuccess)
	msgs := e.downstream.Drain(time.Second)
	keys := map[string]int{}
	for _, m := range msgs {
		keys[m.RoutingKey]++
	}
	require.Equal(t, map[string]int{"warehouse.ship": 1, "points.add": 1, "shipment.updated": 1, "payment.exception": 2}, keys,
		"failures publish nothing; each exception is published")
}

func TestLogisticsEventsApplyForwardOnly(t *testing.T) {
	t.Parallel()
	e := setup(t, worker.Options{})
	a := e.ship(t, "WB-1", "ORD-S", 1, "PICKED_UP")
	e.waitStatus(t, a, callback.StatusSuccess)
	b := e.ship(t, "WB-1", "ORD-S", 3, "DELIVERED")
	e.waitStatus(t, b, callback.StatusSuccess)
	late := e.ship(t, "WB-1", "ORD-S", 2, "IN_TRANSIT") // arrives after seq 3
	e.waitStatus(t, late, callback.StatusSuccess)

	var s struct {
		Status  string
		LastSeq int64
	}
	require.NoError(t, e.st.DB.Raw("SELECT status, last_seq FROM shipments WHERE waybill_no = 'WB-1'").Scan(&s).Error)
	require.Equal(t, "DELIVERED", s.Status, "a late, lower seq never moves the status backwards")
	require.EqualValues(t, 3, s.LastSeq)
	var events int64
	require.NoError(t, e.st.DB.Table("shipment_events").Where("waybill_no = 'WB-1'").Count(&events).Error)
	require.EqualValues(t, 3, events)

	// The same event again, under a new event id (replayed by the carrier
	// with a different delivery id): a no-op.
	require.NoError(t, e.st.DB.Model(&callback.Log{}).Where("id = ?", b).Update("status", "PENDING").Error)
	testenv.Publish(t, e.cfg, "logistics", fmt.Sprintf(`{"log_id":%d}`, b))
	e.waitStatus(t, b, callback.StatusSuccess)

	msgs := e.downstream.Drain(time.Second)
	keys := map[string]int{}
	for _, m := range msgs {
		keys[m.RoutingKey]++
	}
	require.Equal(t, map[string]int{"shipment.updated": 3, "order.delivered": 1}, keys)
}

func TestUnknownLogIDIsAckedNotRetried(t *testing.T) {
	t.Parallel()
	e := setup(t, worker.Options{})
	testenv.Publish(t, e.cfg, "payment", `{"log_id":987654321}`)
	testenv.Publish(t, e.cfg, "payment", `not json`)
	order := testenv.CreateOrders(t, e.cfg, "unk", 1)[0]
	id := e.pay(t, order, 1000, "PAY-UNK")
	e.waitStatus(t, id, callback.StatusSuccess)
	q := testenv.OpenQueue(t, e.cfg.AMQP.Prefix+".payment")
	require.Eventually(t, func() bool { return q.Depth() == 0 }, 5*time.Second, 20*time.Millisecond, "queue drained, nothing requeued forever")
}

func TestOutboxRelayDeliversWhatTheFastPathCouldNot(t *testing.T) {
	t.Parallel()
	proxy := testenv.NewProxy(t, "127.0.0.1:5672")
	var cut atomic.Bool
	opts := worker.Options{Hooks: worker.Hooks{AfterCommit: func(int64) {
		if cut.CompareAndSwap(false, true) {
			proxy.Down() // the broker vanishes right after the commit
		}
	}}}
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.AMQP.URL = "amqp://guest:guest@" + proxy.Addr() + "/"
	})
	st := testenv.Store(t, cfg)
	down := testenv.Downstream(t, cfg)
	testenv.StartWorker(t, cfg, opts)
	order := testenv.CreateOrders(t, cfg, "relay", 1)[0]
	payments := testenv.OpenQueue(t, cfg.AMQP.Prefix+".payment")
	require.Eventually(t, func() bool { return payments.Depth() >= 0 }, 10*time.Second, 20*time.Millisecond, "worker connected and declared its queues")

	// Store and announce directly (the gateway would do the same).
	body := testenv.PaymentBody(order, "PAY-RELAY", 1000)
	res, err := st.InsertCallback(context.Background(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: "relay-1",
		BusinessKey: order, Payload: body, TraceID: "0af7651916cd43dd8448eb211c80319c", ReceivedAt: time.Now()})
	require.NoError(t, err)
	testenv.Publish(t, cfg, "payment", fmt.Sprintf(`{"log_id":%d}`, res.ID))

	require.Eventually(t, func() bool { return cut.Load() }, 10*time.Second, 20*time.Millisecond, "processed")
	var pending int64
	require.NoError(t, st.DB.Model(&outbox.Row{}).Where("callback_log_id = ? AND status = 'PENDING'", res.ID).Count(&pending).Error)
	require.EqualValues(t, 2, pending, "the fast path could not publish: rows wait for the relay")

	proxy.Up(t)
	got := map[string]bool{}
	require.Eventually(t, func() bool {
		if d, ok := down.Get(100 * time.Millisecond); ok {
			got[d.MessageId] = true
		}
		return len(got) == 2
	}, 20*time.Second, 20*time.Millisecond, "the relay delivers every outbox row once the broker is back")
	id := strconv.FormatInt(res.ID, 10)
	require.True(t, got["cb"+id+".warehouse.ship"] && got["cb"+id+".points.add"])
	require.Eventually(t, func() bool {
		require.NoError(t, st.DB.Model(&outbox.Row{}).Where("callback_log_id = ? AND status = 'PENDING'", res.ID).Count(&pending).Error)
		return pending == 0
	}, 5*time.Second, 20*time.Millisecond)
}

// demoPayments is the payment handler as the shipped paydemo source
// configures it (payment_currency CNY).
var demoPayments = payment.Handler{Currencies: map[string]string{"paydemo": "CNY"}}
