package payment_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/payment"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

func fast(c *config.Config) {
	c.Scheduler.Compensation.Interval = 200 * time.Millisecond
	c.Scheduler.OutboxRelay.Interval = 200 * time.Millisecond
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
			store := func(event, body string) int64 {
				res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event,
					BusinessKey: order, Payload: []byte(body), TraceID: fmt.Sprintf("%032x", 1), ReceivedAt: time.Now()})
				require.NoError(t, err)
				msg, err := json.Marshal(map[string][]int64{"log_ids": {res.ID}})
				require.NoError(t, err)
				testenv.Publish(t, cfg, "payment", string(msg))
				return res.ID
			}
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
