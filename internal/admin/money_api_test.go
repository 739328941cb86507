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
// money history: the order's money columns and every payment, refund and
// dispute recorded, each with the callbacks that made it.
func TestAdminMoneyHistory(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	e.createOrder(t, "ORD-MONEY", 1000, "CNY")
	paid := e.postPaydemo(t, "msg_money_pay", `{"orderCode":"ORD-MONEY","paymentNo":"PAY-M","amount":1000,"status":"SUCCESS"}`)
	refund := e.postPaydemo(t, "msg_money_refund", `{"type":"refund","orderCode":"ORD-MONEY","refundNo":"RF-M","amount":300,"status":"SUCCESS"}`)
	dispute := e.postPaydemo(t, "msg_money_dispute", `{"type":"dispute","orderCode":"ORD-MONEY","disputeId":"DP-M","status":"OPEN","amount":700}`)

	var d struct {
		Money struct {
			Order    map[string]any   `json:"order"`
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
	require.EqualValues(t, 300, r["counted"])
	require.EqualValues(t, refund, r["callback_log_id"])
	require.Len(t, d.Money.Disputes, 1)
	require.Equal(t, "OPEN", d.Money.Disputes[0]["status"])
	require.EqualValues(t, dispute, d.Money.Disputes[0]["callback_log_id"])

	// A payment of no order has none.
	var plain map[string]any
	failed := e.failedPayment(t, "ORD-NO-MONEY", 100)
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", failed), opsToken, nil, &plain))
	require.NotContains(t, plain, "money_history")
}
