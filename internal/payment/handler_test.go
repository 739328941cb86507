package payment_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/metrics"
	"callgate/internal/payment"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

func fast(c *config.Config) {
	c.Scheduler.Compensation.Interval = 200 * time.Millisecond
	c.Scheduler.OutboxRelay.Interval = 200 * time.Millisecond
}

// storePayment stores a payment callback of order with body, as the
// gateway would, and announces it alone (a message of one id).
func storePayment(t *testing.T, cfg *config.Config, st *testenv.TestStore, event, order, body string) int64 {
	t.Helper()
	res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event,
		BusinessKey: order, Payload: []byte(body), TraceID: fmt.Sprintf("%032x", 1), ReceivedAt: time.Now()})
	require.NoError(t, err)
	msg, err := json.Marshal(map[string][]int64{"log_ids": {res.ID}})
	require.NoError(t, err)
	testenv.Publish(t, cfg, "payment", string(msg))
	return res.ID
}

// outboxRow is what a subscriber gets of one notification.
type outboxRow struct {
	CallbackLogID int64
	RoutingKey    string
	MessageID     string
}

// TestFailedPaymentNeverShips: a FAILED payment for an unpaid order marks
// it FAILED and writes no notification, whether the worker runs one
// callback per transaction or batches; the later SUCCESS then pays it and
// writes exactly one warehouse.ship and one points.add.
func TestFailedPaymentNeverShips(t *testing.T) {
	t.Parallel()
	for _, bs := range []int{1, 64} {
		t.Run(fmt.Sprintf("batch_size=%d", bs), func(t *testing.T) {
			t.Parallel()
			cfg := testenv.Config(t, fast, func(c *config.Config) { c.Worker.BatchSize = bs })
			st := testenv.Store(t, cfg)
			orders := testenv.CreateOrders(t, cfg, "fail", 1)
			order := orders[0]
			testenv.StartWorker(t, cfg, worker.Options{})
			store := func(event, body string) int64 { return storePayment(t, cfg, st, event, order, body) }
			outbox := func() []outboxRow {
				var rows []outboxRow
				require.NoError(t, st.DB.Raw(`SELECT callback_log_id, routing_key, message_id FROM outbox ORDER BY id`).Scan(&rows).Error)
				return rows
			}

			failed := store("e-failed", fmt.Sprintf(`{"orderCode":%q,"paymentNo":"PAY-1","amount":1000,"status":"FAILED"}`, order))
			st.WaitStatus(t, failed, callback.StatusSuccess)
			var o payment.Order
			require.NoError(t, st.DB.Take(&o, "order_code = ?", order).Error)
			require.Equal(t, payment.OrderPaymentFailed, o.PaymentStatus)
			require.Empty(t, outbox(), "a FAILED payment writes no notification")

			paid := store("e-paid", fmt.Sprintf(`{"orderCode":%q,"paymentNo":"PAY-2","amount":1000,"status":"SUCCESS"}`, order))
			st.WaitStatus(t, paid, callback.StatusSuccess)
			require.NoError(t, st.DB.Take(&o, "order_code = ?", order).Error)
			require.Equal(t, payment.OrderPaid, o.PaymentStatus)
			require.Equal(t, []outboxRow{
				{paid, payment.RoutingWarehouseShip, fmt.Sprintf("cb%d.%s", paid, payment.RoutingWarehouseShip)},
				{paid, payment.RoutingPointsAdd, fmt.Sprintf("cb%d.%s", paid, payment.RoutingPointsAdd)},
			}, outbox(), "one pair of notifications, from the payment that paid")
		})
	}
}

// TestFailedThenPaidInOneBatch: a FAILED payment and the SUCCESS that
// follows it, in one message, are decided by the batch path in one
// transaction: one pair of notifications, from the payment that paid.
func TestFailedThenPaidInOneBatch(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	m := metrics.New("worker")
	order := testenv.CreateOrders(t, cfg, "fb", 1)[0]
	var ids []int64
	for i, body := range []string{
		fmt.Sprintf(`{"orderCode":%q,"paymentNo":"PAY-1","amount":1000,"status":"FAILED"}`, order),
		fmt.Sprintf(`{"orderCode":%q,"paymentNo":"PAY-2","amount":1000,"status":"SUCCESS"}`, order),
	} {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: fmt.Sprintf("e-%d", i),
			BusinessKey: order, Payload: []byte(body), TraceID: fmt.Sprintf("%032x", 1), ReceivedAt: time.Now()})
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	msg, err := json.Marshal(map[string][]int64{"log_ids": ids})
	require.NoError(t, err)
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m})
	testenv.Publish(t, cfg, "payment", string(msg))
	for _, id := range ids {
		st.WaitStatus(t, id, callback.StatusSuccess)
	}
	var rows []outboxRow
	require.NoError(t, st.DB.Raw(`SELECT callback_log_id, routing_key, message_id FROM outbox ORDER BY id`).Scan(&rows).Error)
	require.Equal(t, []outboxRow{
		{ids[1], payment.RoutingWarehouseShip, fmt.Sprintf("cb%d.%s", ids[1], payment.RoutingWarehouseShip)},
		{ids[1], payment.RoutingPointsAdd, fmt.Sprintf("cb%d.%s", ids[1], payment.RoutingPointsAdd)},
	}, rows)
	require.Zero(t, testutil.CollectAndCount(m.BatchFallbacks), "the batch committed as a whole")
}

// TestPaymentInAnotherCurrencyNeverPays: a payment in another currency
// than its order's leaves the order as it was and is reported downstream
// as payment.exception currency_mismatch (SUCCESS, with the exception in
// its attempt's note), counted by kind; a payment without a currency from
// the configured JSON source paydemo is in its payment_currency (CNY), so
// it pays a CNY order and not a JPY one; points.add says the currency.
func TestPaymentInAnotherCurrencyNeverPays(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	m := metrics.New("worker")
	_, err := st.SQL.Exec(`INSERT INTO orders (order_code, user_id, amount, currency) VALUES ('ORD-CUR-1', 7, 1999, 'USD'), ('ORD-CUR-2', 8, 1999, 'JPY'), ('ORD-CUR-3', 9, 1999, 'CNY')`)
	require.NoError(t, err)
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m})
	store := func(event, order, currency string) int64 {
		body := fmt.Sprintf(`{"orderCode":%q,"paymentNo":"PAY-%s","amount":1999,"status":"SUCCESS","currency":%q}`, order, event, currency)
		if currency == "" {
			body = fmt.Sprintf(`{"orderCode":%q,"paymentNo":"PAY-%s","amount":1999,"status":"SUCCESS"}`, order, event)
		}
		return storePayment(t, cfg, st, event, order, body)
	}
	note := func(id int64) string {
		var n string
		require.NoError(t, st.DB.Raw(`SELECT COALESCE(note, '') FROM callback_attempt WHERE log_id = ?`, id).Scan(&n).Error)
		return n
	}

	for i, c := range []string{"JPY", "IDR", "KRW"} {
		id := store(fmt.Sprintf("e-%d", i), "ORD-CUR-1", c)
		st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, "exception currency_mismatch: payment in "+c+", order in USD", note(id))
	}
	var o payment.Order
	require.NoError(t, st.DB.Take(&o, "order_code = ?", "ORD-CUR-1").Error)
	require.Equal(t, payment.OrderUnpaid, o.PaymentStatus, "the order is as it was")
	var kinds []string
	require.NoError(t, st.DB.Raw(`SELECT payload FROM outbox WHERE routing_key = ? ORDER BY id`, payment.RoutingPaymentException).Scan(&kinds).Error)
	require.Equal(t, []string{
		`{"amount":1999,"currency":"JPY","kind":"currency_mismatch","orderCode":"ORD-CUR-1","paymentNo":"PAY-e-0"}`,
		`{"amount":1999,"currency":"IDR","kind":"currency_mismatch","orderCode":"ORD-CUR-1","paymentNo":"PAY-e-1"}`,
		`{"amount":1999,"currency":"KRW","kind":"currency_mismatch","orderCode":"ORD-CUR-1","paymentNo":"PAY-e-2"}`,
	}, kinds)

	usd := store("e-usd", "ORD-CUR-1", "usd")
	st.WaitStatus(t, usd, callback.StatusSuccess)
	yen := store("e-yen", "ORD-CUR-2", "")
	st.WaitStatus(t, yen, callback.StatusSuccess)
	require.Equal(t, "exception currency_mismatch: payment in CNY, order in JPY", note(yen), "paydemo's payment_currency is CNY")
	cny := store("e-cny", "ORD-CUR-3", "")
	st.WaitStatus(t, cny, callback.StatusSuccess)
	var points []string
	require.NoError(t, st.DB.Raw(`SELECT payload FROM outbox WHERE routing_key = ? ORDER BY id`, payment.RoutingPointsAdd).Scan(&points).Error)
	require.Equal(t, []string{
		`{"amount":1999,"currency":"USD","orderCode":"ORD-CUR-1","userId":7}`,
		`{"amount":1999,"currency":"CNY","orderCode":"ORD-CUR-3","userId":9}`,
	}, points)
}
