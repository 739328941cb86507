package admin_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/testenv"
)

// postPaydemo sends body as paydemo's platform would and waits for the
// callback to settle SUCCESS.
func (e *apiEnv) postPaydemo(t *testing.T, event, body string) int64 {
	t.Helper()
	a := testenv.Post(t, e.gw.URL, "paydemo", []byte(body), testenv.PaydemoHeaders(t, e.cfg, event, time.Now(), []byte(body)))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	e.waitStatus(t, a.LogID, callback.StatusSuccess)
	return a.LogID
}

// TestAdminMoneyHistory: a payment callback's detail carries its order's
// money history: the order's money columns, what its facts derive, every
// fact by the platform's time with its place by arrival, and every
// payment, refund and dispute with the callbacks that made it.
func TestAdminMoneyHistory(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	e.createOrder(t, "ORD-MONEY", 1000, "CNY")
	paid := e.postPaydemo(t, "msg_money_pay", `{"orderCode":"ORD-MONEY","paymentNo":"PAY-M","amount":1000,"status":"SUCCESS","occurredAt":"2026-12-01T10:00:00Z"}`)
	refund := e.postPaydemo(t, "msg_money_refund", `{"type":"refund","orderCode":"ORD-MONEY","refundNo":"RF-M","amount":300,"status":"SUCCESS","occurredAt":"2026-12-01T12:00:00Z"}`)
	// Opened before the refund, by the platform's clock; arrived after it.
	dispute := e.postPaydemo(t, "msg_money_dispute", `{"type":"dispute","orderCode":"ORD-MONEY","disputeId":"DP-M","status":"OPEN","amount":700,"occurredAt":"2026-12-01T11:00:00Z"}`)

	var d struct {
		Money struct {
			Order    map[string]any   `json:"order"`
			State    map[string]any   `json:"state"`
			Facts    []map[string]any `json:"facts"`
			Payments []map[string]any `json:"payments"`
			Refunds  []map[string]any `json:"refunds"`
			Disputes []map[string]any `json:"disputes"`
		} `json:"money_history"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", refund), opsToken, nil, &d))
	o := d.Money.Order
	require.Equal(t, "ORD-MONEY", o["order_code"])
	require.Equal(t, "PARTIALLY_REFUNDED", o["payment_status"])
	require.Equal(t, "PAY-M", o["payment_no"])
	require.EqualValues(t, 300, o["refunded_amount"])
	require.Equal(t, "OPEN", o["dispute_status"])
	require.Len(t, d.Money.Payments, 1)
	require.Equal(t, map[string]any{"payment_no": "PAY-M", "status": "SUCCEEDED", "paying": true, "amount": float64(1000), "currency": "CNY",
		"callback_log_id": float64(paid), "last_log_id": float64(paid)}, d.Money.Payments[0])
	require.Len(t, d.Money.Refunds, 1)
	r := d.Money.Refunds[0]
	require.Equal(t, "RF-M", r["refund_no"])
	require.Equal(t, "SUCCEEDED", r["status"])
	require.EqualValues(t, refund, r["callback_log_id"])
	require.Len(t, d.Money.Disputes, 1)
	require.Equal(t, "OPEN", d.Money.Disputes[0]["status"])
	require.EqualValues(t, dispute, d.Money.Disputes[0]["callback_log_id"])
	require.Equal(t, map[string]any{"left": float64(700), "excess": float64(0), "shipped": true, "cancelled": false, "closed": false}, d.Money.State)
	var happened []string
	for _, f := range d.Money.Facts {
		happened = append(happened, fmt.Sprintf("%v %v %v #%v at %v", f["kind"], f["ref"], f["status"], f["arrival"], f["occurred_at"]))
	}
	require.Equal(t, []string{
		"payment PAY-M SUCCEEDED #1 at 2026-12-01T10:00:00Z",
		"dispute DP-M OPEN #3 at 2026-12-01T11:00:00Z",
		"refund RF-M SUCCEEDED #2 at 2026-12-01T12:00:00Z",
	}, happened, "by the platform's time, each with its place by arrival")

	// A payment of no order has none.
	var plain map[string]any
	failed := e.failedPayment(t, "ORD-NO-MONEY", 100)
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", failed), opsToken, nil, &plain))
	require.NotContains(t, plain, "money_history")
}
