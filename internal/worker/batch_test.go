package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/logging"
	"callgate/internal/metrics"
	"callgate/internal/payment"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// inAMinute is the next_attempt_at the gateway gives a new callback (the
// compensation job's safety net), so that only the test's announcement
// delivers it.
func inAMinute() *time.Time {
	t := time.Now().UTC().Add(time.Minute)
	return &t
}

// storeCallbacks stores n payment callbacks for n new orders (each its own
// key) without announcing them, and returns their ids.
func storeCallbacks(t *testing.T, cfg *config.Config, st *testenv.TestStore, tag string, n int) []int64 {
	t.Helper()
	orders := testenv.CreateOrders(t, cfg, tag, n)
	ids := make([]int64, n)
	for i, order := range orders {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: fmt.Sprintf("%s-%d", tag, i),
			BusinessKey: order, Payload: testenv.PaymentBody(order, fmt.Sprintf("PAY-%s-%d", tag, i), int64(1000+i)),
			TraceID: fmt.Sprintf("%032x", i+1), ReceivedAt: time.Now(), NextAttemptAt: inAMinute()})
		require.NoError(t, err)
		ids[i] = res.ID
	}
	return ids
}

func announceIDs(t *testing.T, cfg *config.Config, ids []int64) {
	t.Helper()
	body, err := json.Marshal(map[string][]int64{"log_ids": ids})
	require.NoError(t, err)
	testenv.Publish(t, cfg, "payment", string(body))
}

// TestBatchProcessesAnnouncedCallbacksTogether: one announcement of 20
// callbacks (as the gateway sends for a group-commit batch) is processed
// as one batch: all SUCCESS with one attempt each, every notification
// published, no fallback.
func TestBatchProcessesAnnouncedCallbacksTogether(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	down := testenv.Downstream(t, cfg)
	m := metrics.New("worker")
	ids := storeCallbacks(t, cfg, st, "batch", 20)
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m})
	announceIDs(t, cfg, ids)

	for _, id := range ids {
		row := st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts)
		require.Len(t, attemptsOf(t, st, id), 1)
	}
	var paid int64
	require.NoError(t, st.DB.Model(&payment.Order{}).Where("payment_status = ?", payment.OrderPaid).Count(&paid).Error)
	require.EqualValues(t, 20, paid)
	require.Len(t, down.Drain(2*time.Second), 40, "two notifications per callback")
	require.Zero(t, testutil.CollectAndCount(m.BatchFallbacks), "no batch fell back")
	require.EqualValues(t, 1, testutil.CollectAndCount(m.BatchSizes), "the batch size was observed")
}

// TestBatchWithAPoisonCallback: one callback of a batch fails (its handler
// refuses it for good). The others end SUCCESS with exactly one attempt
// each; the poison one FAILED with one attempt; the batch fell back to one
// transaction per callback once.
func TestBatchWithAPoisonCallback(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	m := metrics.New("worker")
	ids := storeCallbacks(t, cfg, st, "poison", 10)
	poison := ids[4]
	var runs atomic.Int64
	reg := registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		runs.Add(1)
		if cb.ID == poison {
			return callback.Permanentf("poison: this payload can never be processed")
		}
		return demoPayments.Handle(ctx, tx, cb, out)
	})
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m, Registry: reg})
	announceIDs(t, cfg, ids)

	row := st.WaitStatus(t, poison, callback.StatusFailed)
	require.Equal(t, 1, row.Attempts)
	require.Contains(t, *row.LastError, "poison")
	for _, id := range ids {
		if id == poison {
			continue
		}
		row := st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts, "callback %d: another's failure used none of its attempts", id)
		att := attemptsOf(t, st, id)
		require.Len(t, att, 1)
		require.Equal(t, callback.OutcomeSuccess, att[0].Outcome)
	}
	require.InDelta(t, 1, testutil.ToFloat64(m.BatchFallbacks.WithLabelValues("handler")), 0)
}

// TestOldSingleIDAnnouncementIsProcessed: a message in the format of
// earlier versions ({"log_id":N}), queued before an upgrade, is processed.
func TestOldSingleIDAnnouncementIsProcessed(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	ids := storeCallbacks(t, cfg, st, "old", 2)
	testenv.StartWorker(t, cfg, worker.Options{})
	testenv.Publish(t, cfg, "payment", fmt.Sprintf(`{"log_id":%d}`, ids[0]))
	announceIDs(t, cfg, ids[1:])
	st.WaitStatus(t, ids[0], callback.StatusSuccess)
	st.WaitStatus(t, ids[1], callback.StatusSuccess)
}

// storeBodies stores payment callbacks with the given keys and bodies, in
// this order, without announcing them, and returns their ids.
func storeBodies(t *testing.T, st *testenv.TestStore, tag string, keys []string, bodies []string) []int64 {
	t.Helper()
	ids := make([]int64, len(bodies))
	for i, body := range bodies {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: fmt.Sprintf("%s-%d", tag, i),
			BusinessKey: keys[i], Payload: []byte(body), TraceID: fmt.Sprintf("%032x", i+1), ReceivedAt: time.Now(), NextAttemptAt: inAMinute()})
		require.NoError(t, err)
		ids[i] = res.ID
	}
	return ids
}

func payBody(order, paymentNo string, amount int64, status, paidAt string) string {
	return fmt.Sprintf(`{"orderCode":%q,"paymentNo":%q,"amount":%d,"status":%q,"paidAt":%q}`, order, paymentNo, amount, status, paidAt)
}

// TestBatchPaymentsDecidedAsOneByOne: the payment handler decides a whole
// batch with one read and one write of orders. Several callbacks of one
// order in the batch see each other's effects in id order, exactly as one
// transaction per callback would: a failed payment then a successful one,
// a resend of an applied payment (no change, no notification), a failed
// attempt after the payment (no change), a notification without effect
// (its note recorded). No fallback: the batch commits as a whole.
func TestBatchPaymentsDecidedAsOneByOne(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	down := testenv.Downstream(t, cfg)
	m := metrics.New("worker")
	o := testenv.CreateOrders(t, cfg, "bpay", 4) // amounts 1000, 1001, 1002, 1003
	const at = "2026-11-30T10:00:00Z"
	keys := []string{o[0], o[1], o[1], o[0], o[0], o[2], o[3]}
	ids := storeBodies(t, st, "bpay", keys, []string{
		payBody(o[0], "PAY-A", 1000, "SUCCESS", at),
		payBody(o[1], "PAY-B", 1001, "FAILED", at),
		payBody(o[1], "PAY-C", 1001, "SUCCESS", "2026-11-30T11:00:00Z"),
		payBody(o[0], "PAY-A", 1000, "SUCCESS", at), // the platform's resend, another event id
		payBody(o[0], "PAY-X", 1000, "FAILED", at),
		`{"ignored":"trade status WAIT_BUYER_PAY changes nothing"}`,
		payBody(o[3], "PAY-D", 1003, "SUCCESS", at),
	})
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m})
	announceIDs(t, cfg, ids)

	for i, id := range ids {
		row := st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts, "callback %d", i)
		att := attemptsOf(t, st, id)
		require.Len(t, att, 1)
		notes := map[int]string{
			3: "already recorded: payment/PAY-A/SUCCEEDED",
			4: "recorded: the order's money is unchanged",
			5: "trade status WAIT_BUYER_PAY changes nothing",
		}
		if note, ok := notes[i]; ok {
			require.NotNil(t, att[0].Note, "callback %d", i)
			require.Equal(t, note, *att[0].Note)
		} else {
			require.Nil(t, att[0].Note, "callback %d", i)
		}
	}
	var orders []payment.Order
	require.NoError(t, st.DB.Where("order_code IN ?", o).Order("order_code").Find(&orders).Error)
	require.Len(t, orders, 4)
	want := []struct {
		status, no, paidAt string
	}{{payment.OrderPaid, "PAY-A", at}, {payment.OrderPaid, "PAY-C", "2026-11-30T11:00:00Z"}, {payment.OrderUnpaid, "", ""}, {payment.OrderPaid, "PAY-D", at}}
	for i, w := range want {
		got := orders[i]
		require.Equal(t, w.status, got.PaymentStatus, got.OrderCode)
		if w.no == "" {
			require.Nil(t, got.PaymentNo, got.OrderCode)
			require.Nil(t, got.PaidAt, got.OrderCode)
			continue
		}
		require.Equal(t, w.no, *got.PaymentNo, got.OrderCode)
		require.Equal(t, w.paidAt, got.PaidAt.UTC().Format(time.RFC3339), got.OrderCode)
	}
	var perCallback []struct {
		CallbackLogID int64
		N             int
	}
	require.NoError(t, st.DB.Raw(`SELECT callback_log_id, COUNT(*) AS n FROM outbox WHERE callback_log_id IN ? GROUP BY callback_log_id ORDER BY callback_log_id`, ids).
		Scan(&perCallback).Error)
	require.Equal(t, []struct {
		CallbackLogID int64
		N             int
	}{{ids[0], 2}, {ids[2], 2}, {ids[6], 2}}, perCallback, "notifications only for the callbacks that paid an order")
	require.Len(t, down.Drain(2*time.Second), 6)
	require.Zero(t, testutil.CollectAndCount(m.BatchFallbacks), "the batch committed as a whole")
}

// TestBatchPaymentRefusedInsideTheBatch: the batch handler finds a
// callback it must refuse once it has read the batch's orders (a currency
// that is no ISO 4217 code). The batch rolls back and runs one by one: the
// refused callback FAILED with the reason, every other SUCCESS with one
// attempt, and the order keeps the first payment.
func TestBatchPaymentRefusedInsideTheBatch(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	m := metrics.New("worker")
	o := testenv.CreateOrders(t, cfg, "bref", 3)
	const at = "2026-11-30T10:00:00Z"
	ids := storeBodies(t, st, "bref", []string{o[0], o[1], o[1], o[2]}, []string{
		payBody(o[0], "PAY-1", 1000, "SUCCESS", at),
		payBody(o[1], "PAY-2", 1001, "SUCCESS", at),
		strings.Replace(payBody(o[1], "PAY-3", 1001, "SUCCESS", at), `"status"`, `"currency":"ZZZ","status"`, 1),
		payBody(o[2], "PAY-4", 1002, "SUCCESS", at),
	})
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m})
	announceIDs(t, cfg, ids)

	row := st.WaitStatus(t, ids[2], callback.StatusFailed)
	require.Equal(t, 1, row.Attempts)
	require.Equal(t, `invalid payload: currency "ZZZ" is not an ISO 4217 code`, *row.LastError)
	for _, i := range []int{0, 1, 3} {
		row := st.WaitStatus(t, ids[i], callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts, "callback %d", i)
		require.Len(t, attemptsOf(t, st, ids[i]), 1)
	}
	var order payment.Order
	require.NoError(t, st.DB.Take(&order, "order_code = ?", o[1]).Error)
	require.Equal(t, "PAY-2", *order.PaymentNo)
	// At least once: on a loaded machine the batch's transaction can pass
	// its bound and be killed (store/tx_bounded.go), and the batch run
	// again meets the same refusal (a fresh-clone make test saw 2).
	require.GreaterOrEqual(t, testutil.ToFloat64(m.BatchFallbacks.WithLabelValues("handler")), 1.0)
}

// carrierRun stores a sequence of carrier events that exercises every rule
// of the logistics handler, processes it as one announcement with the
// given batch size, and returns the shipments and each callback's
// notifications (waybills without the run's tag).
func carrierRun(t *testing.T, batchSize int) (shipments []string, notes []string) {
	t.Helper()
	cfg := testenv.Config(t, fast, func(c *config.Config) { c.Worker.BatchSize = batchSize })
	st := testenv.Store(t, cfg)
	m := metrics.New("worker")
	tag := fmt.Sprintf("wb%d", batchSize)
	w := func(n int) string { return fmt.Sprintf("%s-%d", tag, n) }
	type ev struct {
		waybill, order string
		seq            int
		status         string
	}
	evs := []ev{
		{w(1), "ORD-X", 1, "PICKED_UP"},
		{w(1), "", 2, "IN_TRANSIT"},      // the order comes from the shipment
		{w(1), "ORD-X", 1, "PICKED_UP"},  // the carrier's resend: nothing
		{w(2), "", 5, "DELIVERED"},       // no order known: no order.delivered
		{w(2), "", 3, "IN_TRANSIT"},      // late: recorded, the status stays
		{w(2), "ORD-Y", 6, "DELIVERED"},  // brings the order code
		{w(3), "ORD-Z", 1, "IN_TRANSIT"}, // recorded before this run
		{w(1), "", 4, "DELIVERED"},
	}
	_, err := st.SQL.Exec(`INSERT INTO shipment_events (waybill_no, seq, status, occurred_at) VALUES (?, 1, 'IN_TRANSIT', NOW(6))`, w(3))
	require.NoError(t, err)
	ids := make([]int64, len(evs))
	for i, e := range evs {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "shipdemo", Kind: "logistics", EventID: fmt.Sprintf("%s-%d", tag, i),
			BusinessKey: e.waybill, Payload: testenv.ShipmentBody(e.waybill, e.order, e.seq, e.status),
			TraceID: fmt.Sprintf("%032x", i+1), ReceivedAt: time.Now()})
		require.NoError(t, err)
		ids[i] = res.ID
	}
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m})
	body, err := json.Marshal(map[string][]int64{"log_ids": ids})
	require.NoError(t, err)
	testenv.Publish(t, cfg, "logistics", string(body))
	for _, id := range ids {
		row := st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts)
	}
	require.Zero(t, testutil.CollectAndCount(m.BatchFallbacks), "no fallback")

	var rows []struct {
		WaybillNo string
		OrderCode *string
		Status    string
		LastSeq   int
	}
	require.NoError(t, st.DB.Raw(`SELECT waybill_no, order_code, status, last_seq FROM shipments WHERE waybill_no LIKE ? ORDER BY waybill_no`, tag+"-%").
		Scan(&rows).Error)
	for _, r := range rows {
		code := "NULL"
		if r.OrderCode != nil {
			code = *r.OrderCode
		}
		shipments = append(shipments, fmt.Sprintf("%s %s %s %d", r.WaybillNo[len(tag):], code, r.Status, r.LastSeq))
	}
	var events int
	require.NoError(t, st.DB.Raw(`SELECT COUNT(*) FROM shipment_events WHERE waybill_no LIKE ?`, tag+"-%").Scan(&events).Error)
	shipments = append(shipments, fmt.Sprintf("%d events", events))
	var out []struct {
		CallbackLogID int64
		RoutingKey    string
		Payload       string
	}
	require.NoError(t, st.DB.Raw(`SELECT callback_log_id, routing_key, payload FROM outbox WHERE callback_log_id IN ? ORDER BY callback_log_id, id`, ids).
		Scan(&out).Error)
	for _, o := range out {
		i := slices.Index(ids, o.CallbackLogID)
		notes = append(notes, fmt.Sprintf("%d %s %s", i, o.RoutingKey, strings.ReplaceAll(o.Payload, tag, "")))
	}
	return shipments, notes
}

// TestBatchCarrierEventsAsOneByOne: the logistics handler's batch (four
// statements for the whole batch) leaves the same shipments, records the
// same events and writes the same notifications as one transaction per
// callback: a resend and an event recorded before change nothing, a late
// event is recorded without moving the status back, an order code comes
// from the shipment when the carrier does not send one, and order.delivered
// only goes out with a known order.
func TestBatchCarrierEventsAsOneByOne(t *testing.T) {
	t.Parallel()
	oneShipments, oneNotes := carrierRun(t, 1)
	batchShipments, batchNotes := carrierRun(t, 64)
	require.Equal(t, []string{"-1 ORD-X DELIVERED 4", "-2 ORD-Y DELIVERED 6", "7 events"}, oneShipments)
	require.Equal(t, []string{
		`0 shipment.updated {"orderCode":"ORD-X","seq":1,"status":"PICKED_UP","waybillNo":"-1"}`,
		`1 shipment.updated {"orderCode":"ORD-X","seq":2,"status":"IN_TRANSIT","waybillNo":"-1"}`,
		`3 shipment.updated {"seq":5,"status":"DELIVERED","waybillNo":"-2"}`,
		`4 shipment.updated {"seq":3,"status":"IN_TRANSIT","waybillNo":"-2"}`,
		`5 shipment.updated {"orderCode":"ORD-Y","seq":6,"status":"DELIVERED","waybillNo":"-2"}`,
		`5 order.delivered {"orderCode":"ORD-Y","waybillNo":"-2"}`,
		`7 shipment.updated {"orderCode":"ORD-X","seq":4,"status":"DELIVERED","waybillNo":"-1"}`,
		`7 order.delivered {"orderCode":"ORD-X","waybillNo":"-1"}`,
	}, oneNotes)
	require.Equal(t, oneShipments, batchShipments, "shipments: batch as one by one")
	require.Equal(t, oneNotes, batchNotes, "notifications: batch as one by one")
}

// TestBatchSummaryLine: each batch logs one INFO line saying how many of
// its callbacks succeeded, were retried and failed (docs/operations: what
// `make run` shows), and each FAILED callback its own WARN line. One
// announcement of 10: one fails for good, one fails once and is retried,
// eight succeed; the retry succeeds in a later batch.
func TestBatchSummaryLine(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	ids := storeCallbacks(t, cfg, st, "summary", 10)
	poison, flaky := ids[2], ids[6]
	reg := registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		switch {
		case cb.ID == poison:
			return callback.Permanentf("poison: never")
		case cb.ID == flaky && cb.Attempts == 0: // until one failed attempt is recorded
			return fmt.Errorf("warehouse API timeout")
		}
		return demoPayments.Handle(ctx, tx, cb, out)
	})
	logs := &testenv.SyncBuffer{}
	testenv.StartWorkerLogging(t, cfg, worker.Options{Registry: reg}, logging.New(logging.Config{Level: "info", Format: "json"}, logs))
	announceIDs(t, cfg, ids)
	st.WaitStatus(t, poison, callback.StatusFailed)
	for _, id := range ids {
		if id != poison {
			st.WaitStatus(t, id, callback.StatusSuccess)
		}
	}

	type line struct {
		Level, Msg                            string
		Callbacks, Succeeded, Retried, Failed int
		LogID                                 int64 `json:"log_id"`
	}
	// Every recorded attempt is in exactly one batch line. Which batch
	// settles a callback depends on timing: one the announcement's batch
	// could not claim (busy, a dropped connection) is settled in a later
	// one, after compensation re-announces it.
	var batches []line
	failedLines := 0
	var sum line
	require.Eventually(t, func() bool {
		batches, failedLines, sum = nil, 0, line{}
		for _, raw := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var l line
			require.NoError(t, json.Unmarshal([]byte(raw), &l), raw)
			switch l.Msg {
			case "worker: batch processed":
				require.Equal(t, "INFO", l.Level)
				require.LessOrEqual(t, l.Succeeded+l.Retried+l.Failed, l.Callbacks, "a line counts its own batch's callbacks: %s", raw)
				batches = append(batches, l)
				sum.Succeeded, sum.Retried, sum.Failed = sum.Succeeded+l.Succeeded, sum.Retried+l.Retried, sum.Failed+l.Failed
			case "worker: callback FAILED":
				require.Equal(t, poison, l.LogID)
				failedLines++
			}
		}
		return sum.Succeeded == 9 && sum.Retried == 1 && sum.Failed == 1
	}, 10*time.Second, 20*time.Millisecond, "batch lines for 9 successes, 1 retry and 1 failure:\n%s", logs)
	// The announcement's callbacks run as a batch (its fall-back one by
	// one included); under load, compensation may have claimed one of
	// them first, in a batch of its own (seen in a fresh-clone make test).
	largest, total := 0, 0
	for _, b := range batches {
		largest, total = max(largest, b.Callbacks), total+b.Callbacks
	}
	require.GreaterOrEqual(t, largest, 9, "the announcement's batch: %+v", batches)
	require.GreaterOrEqual(t, total, 10, "every callback is in a batch line: %+v", batches)
	var attempts []struct {
		Outcome string
		N       int
	}
	require.NoError(t, st.DB.Raw(`SELECT outcome, COUNT(*) AS n FROM callback_attempt GROUP BY outcome ORDER BY outcome`).Scan(&attempts).Error)
	counted := map[string]int{}
	for _, a := range attempts {
		counted[a.Outcome] = a.N
	}
	require.Equal(t, map[string]int{"FAILED": 1, "RETRY": 1, "SUCCESS": 9}, counted, "the lines count the attempts recorded")
	require.Equal(t, 1, failedLines, "the FAILED callback has its own line")
}
