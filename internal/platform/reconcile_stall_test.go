package platform_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/reconcile"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/test/platformsim"
)

// twoReconciled is a gateway and a worker asking two platforms: WeChat Pay
// (source wechatpay) and Alipay (source alipay), each its own simulator.
type twoReconciled struct {
	*testenv.Platform
	wechat  *platformsim.WeChatPay
	alipay  *platformsim.Alipay
	metrics string
}

func startTwoReconciled(t *testing.T, rc reconcile.Config) *twoReconciled {
	t.Helper()
	keys := testenv.RSAKeys()
	r := &twoReconciled{
		wechat: platformsim.StartWeChatPay(t, wechatMchID, wechatMchSerial, &keys[1].PublicKey, keys[0], wechatPubKeyID),
		alipay: platformsim.StartAlipay(t, alipayAppID, &keys[1].PublicKey, keys[0]),
	}
	dir := t.TempDir()
	wxKey, aliKey := filepath.Join(dir, "apiclient_key.pem"), filepath.Join(dir, "app_private_key.pem")
	der, err := x509.MarshalPKCS8PrivateKey(keys[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(wxKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(aliKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(keys[1])}), 0o600))
	alipayCfg := platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(keys[0])}}, AppID: alipayAppID}
	r.Platform = testenv.StartPlatform(t, "wechatpay", wechatKeyConfig(), testenv.WithPlatform("alipay", alipayCfg), func(c *config.Config) {
		r.metrics = workerMetricsOn(t, c)
		for i := range c.Sources {
			switch c.Sources[i].Name {
			case "wechatpay":
				c.Sources[i].Reconcile.PrivateKeyFile, c.Sources[i].Reconcile.Serial, c.Sources[i].Reconcile.APIBase = wxKey, wechatMchSerial, r.wechat.URL
			case "alipay":
				c.Sources[i].Reconcile.PrivateKeyFile, c.Sources[i].Reconcile.APIBase = aliKey, r.alipay.URL
			}
		}
		if rc.Interval == 0 {
			rc.Interval = 100 * time.Millisecond
		}
		c.Scheduler.Reconcile = rc.WithDefaults()
		c.Scheduler.Gauges.Interval = 100 * time.Millisecond
	})
	return r
}

// order creates an UNPAID order of source created age ago.
func (r *twoReconciled) order(t *testing.T, source, code string, amount int64, age time.Duration) {
	t.Helper()
	r.CreateOrder(t, code, amount, "CNY")
	_, err := r.St.SQL.Exec(`UPDATE orders SET payment_source = ?, created_at = ? WHERE order_code = ?`, source, time.Now().UTC().Add(-age), code)
	require.NoError(t, err)
}

func (r *twoReconciled) waitStatus(t *testing.T, order, status string) {
	t.Helper()
	require.Eventually(t, func() bool { return r.Order(t, order).PaymentStatus == status }, 20*time.Second, 20*time.Millisecond, "order %s, want %s", order, status)
}

func (r *twoReconciled) platformState(t *testing.T, source string) store.PlatformState {
	t.Helper()
	p, err := r.St.ReconcilePlatform(t.Context(), source)
	require.NoError(t, err)
	return p
}

func alipayPaid(tradeNo, total string) map[string]string {
	return map[string]string{"trade_no": tradeNo, "trade_status": "TRADE_SUCCESS", "total_amount": total, "send_pay_date": "2026-12-03 10:34:56"}
}

// TestReconcileAHungPlatformDelaysOnlyItsOwnOrders: WeChat Pay hangs (every
// query times out) with five orders due, older than Alipay's one: Alipay's
// order is asked and paid while WeChat Pay's first query still hangs (each
// platform is asked on its own). Three timeouts in a row open WeChat Pay's
// circuit: recorded for the fleet, shown by the metrics, and nothing more
// is asked of it (its other orders keep their steps); once the circuit's
// time is over, one query decides, and WeChat Pay answering closes it.
func TestReconcileAHungPlatformDelaysOnlyItsOwnOrders(t *testing.T) {
	t.Parallel()
	r := startTwoReconciled(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour},
		QueryTimeout: 2 * time.Second, CircuitAfter: 3, CircuitOpen: 3 * time.Second})
	r.wechat.Misbehave(platformsim.Misbehaviour{Delay: time.Hour})
	for i := range 5 {
		code := "WX-HUNG-" + string(rune('1'+i))
		r.wechat.SetTransaction(code, wechatAnswer("42000000012026120300000000"+string(rune('1'+i)), "SUCCESS", 100))
		r.order(t, "wechatpay", code, 100, 10*time.Minute)
	}
	r.alipay.SetTrade("ALI-FAST-1", alipayPaid("2026120322001400000000000077", "1.00"))
	r.order(t, "alipay", "ALI-FAST-1", 100, 5*time.Minute)

	r.waitStatus(t, "ALI-FAST-1", payment.OrderPaid)
	require.LessOrEqual(t, r.wechat.Requests(), 2, "Alipay's order waited for WeChat Pay's queries")

	require.Eventually(t, func() bool { return r.platformState(t, "wechatpay").CircuitOpenUntil != nil }, 20*time.Second, 50*time.Millisecond)
	p := r.platformState(t, "wechatpay")
	require.Equal(t, 3, p.Failures)
	require.Equal(t, 1, p.CircuitOpened)
	require.Regexp(t, `(deadline|Timeout) exceeded`, p.LastError)
	require.Eventually(t, func() bool {
		return counterAt(t, r.metrics, "callgate_reconcile_circuit_open", `process="worker",source="wechatpay"`) == 1
	}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, counterAt(t, r.metrics, "callgate_reconcile_circuit_opened_total", `process="worker",source="wechatpay"`))
	require.Equal(t, 0, counterAt(t, r.metrics, "callgate_reconcile_circuit_open", `process="worker",source="alipay"`))
	asked := r.wechat.Requests()
	require.Equal(t, 3, asked, "asked until the circuit opened, then not")
	var charged int64
	require.NoError(t, r.St.DB.Table("reconcile_orders").Where("source = ?", "wechatpay").Count(&charged).Error)
	require.EqualValues(t, 3, charged, "the orders not asked keep their steps")

	// WeChat Pay answers again: after circuit_open, one query closes the
	// circuit, and every order is paid.
	r.wechat.Misbehave(platformsim.Misbehaviour{})
	time.Sleep(time.Second)
	require.Equal(t, asked, r.wechat.Requests(), "nothing asked while the circuit is open")
	for i := range 5 {
		code := "WX-HUNG-" + string(rune('1'+i))
		_, err := r.St.SQL.Exec(`UPDATE reconcile_orders SET next_at = ? WHERE order_code = ?`, time.Now().UTC(), code)
		require.NoError(t, err)
		r.waitStatus(t, code, payment.OrderPaid)
	}
	p = r.platformState(t, "wechatpay")
	require.Zero(t, p.Failures)
	require.Nil(t, p.CircuitOpenUntil)
	require.Eventually(t, func() bool {
		return counterAt(t, r.metrics, "callgate_reconcile_circuit_open", `process="worker",source="wechatpay"`) == 0
	}, 5*time.Second, 50*time.Millisecond)
}

// TestReconcileASlowPlatformHoldsBackTheOthersOneRunAtMost: WeChat Pay
// answers every query, slowly (1 s each), with six orders due: its
// circuit never opens, yet an Alipay order that becomes due meanwhile is
// asked after at most one of WeChat Pay's queries, not after all six (a
// source's run stops asking after an interval; the rest of its orders
// are the next run's).
func TestReconcileASlowPlatformHoldsBackTheOthersOneRunAtMost(t *testing.T) {
	t.Parallel()
	r := startTwoReconciled(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}, QueryTimeout: 5 * time.Second})
	r.wechat.Misbehave(platformsim.Misbehaviour{Delay: time.Second})
	for i := range 6 {
		code := "WX-SLOW-" + string(rune('1'+i))
		r.wechat.SetTransaction(code, wechatAnswer("", "NOTPAY", 100))
		r.order(t, "wechatpay", code, 100, 10*time.Minute)
	}
	require.Eventually(t, func() bool { return r.wechat.Requests() >= 1 }, 10*time.Second, 10*time.Millisecond)
	r.alipay.SetTrade("ALI-BESIDE-SLOW", alipayPaid("2026120322001400000000000088", "1.00"))
	r.order(t, "alipay", "ALI-BESIDE-SLOW", 100, 5*time.Minute)
	require.Eventually(t, func() bool { return r.alipay.Asked("ALI-BESIDE-SLOW") >= 1 }, 20*time.Second, 5*time.Millisecond)
	require.LessOrEqual(t, r.wechat.Requests(), 4, "the Alipay order waited for WeChat Pay's whole run")
	r.waitStatus(t, "ALI-BESIDE-SLOW", payment.OrderPaid)
	require.Nil(t, r.platformState(t, "wechatpay").CircuitOpenUntil, "slow is not unreachable")
	for i := range 6 {
		r.wechatState(t, "WX-SLOW-"+string(rune('1'+i)))
	}
}

// wechatState waits until order was asked.
func (r *twoReconciled) wechatState(t *testing.T, order string) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := r.St.GetReconcile(t.Context(), order)
		return err == nil && st.LastOutcome == reconcile.OutcomeNothing
	}, 30*time.Second, 50*time.Millisecond, "order %s asked", order)
}

// TestReconcileA429PausesThePlatformWithoutSpendingSteps: Alipay answering
// 429 with Retry-After pauses the alipay source until then: one request,
// however many orders are due and however often the job runs; no order is
// charged a query (none has a reconciliation row); WeChat Pay is asked
// meanwhile. A Retry-After longer than max_pause is capped. Once the pause
// is over and Alipay answers, the orders are found.
func TestReconcileA429PausesThePlatformWithoutSpendingSteps(t *testing.T) {
	t.Parallel()
	r := startTwoReconciled(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}, MaxPause: 3 * time.Second})
	r.alipay.Misbehave(platformsim.Misbehaviour{Status: 429, RetryAfter: "3600"})
	for _, code := range []string{"ALI-429-1", "ALI-429-2", "ALI-429-3"} {
		r.alipay.SetTrade(code, alipayPaid("20261203220014000000"+strings.TrimPrefix(code, "ALI-429-")+"0000000", "1.00"))
		r.order(t, "alipay", code, 100, 5*time.Minute)
	}
	r.wechat.SetTransaction("WX-BESIDE-1", wechatAnswer("4200000001202612030000000099", "SUCCESS", 100))
	r.order(t, "wechatpay", "WX-BESIDE-1", 100, 5*time.Minute)

	require.Eventually(t, func() bool { return r.platformState(t, "alipay").PausedUntil != nil }, 10*time.Second, 20*time.Millisecond)
	p := r.platformState(t, "alipay")
	require.Contains(t, p.PauseReason, "HTTP 429")
	require.WithinDuration(t, time.Now().Add(3*time.Second), *p.PausedUntil, 3*time.Second, "Retry-After 3600 capped at max_pause")
	r.waitStatus(t, "WX-BESIDE-1", payment.OrderPaid)
	time.Sleep(time.Second) // about ten runs
	require.Equal(t, 1, r.alipay.Requests(), "asked once, then paused")
	var charged int64
	require.NoError(t, r.St.DB.Table("reconcile_orders").Where("source = ?", "alipay").Count(&charged).Error)
	require.Zero(t, charged, "a 429 spends no order's step")
	require.Positive(t, queries(t, r.metrics, "alipay", reconcile.OutcomeThrottled))
	require.Eventually(t, func() bool {
		return counterAt(t, r.metrics, "callgate_reconcile_paused", `process="worker",source="alipay"`) == 1
	}, 5*time.Second, 50*time.Millisecond)

	r.alipay.Misbehave(platformsim.Misbehaviour{})
	for _, code := range []string{"ALI-429-1", "ALI-429-2", "ALI-429-3"} {
		r.waitStatus(t, code, payment.OrderPaid)
	}
	require.Eventually(t, func() bool {
		return counterAt(t, r.metrics, "callgate_reconcile_paused", `process="worker",source="alipay"`) == 0
	}, 5*time.Second, 50*time.Millisecond)
}

// TestReconcileLeavesNoOrderUnlisted: orders created before the query
// window (reconciliation switched on late, a backlog longer than a day)
// are asked once, each its last query: found, or given up on and listed
// for on-call; an order FAILED (a failed attempt) is asked until give_up
// like an unpaid one, and paid when the platform says so.
func TestReconcileLeavesNoOrderUnlisted(t *testing.T) {
	t.Parallel()
	r := startTwoReconciled(t, reconcile.Config{After: time.Minute, GiveUp: 48 * time.Hour, Backoff: []time.Duration{time.Hour}})
	r.alipay.SetTrade("ALI-OLD-PAID", alipayPaid("2026110122001400000000000001", "1.00"))
	r.order(t, "alipay", "ALI-OLD-PAID", 100, 5*24*time.Hour)
	r.order(t, "alipay", "ALI-OLD-NOTHING", 100, 30*24*time.Hour)
	r.alipay.SetTrade("ALI-FAILED-1", alipayPaid("2026120322001400000000000002", "1.00"))
	r.order(t, "alipay", "ALI-FAILED-1", 100, 5*time.Minute)
	_, err := r.St.SQL.Exec(`UPDATE orders SET payment_status = ? WHERE order_code = ?`, payment.OrderPaymentFailed, "ALI-FAILED-1")
	require.NoError(t, err)

	r.waitStatus(t, "ALI-OLD-PAID", payment.OrderPaid)
	r.waitStatus(t, "ALI-FAILED-1", payment.OrderPaid)
	require.Eventually(t, func() bool {
		st, err := r.St.GetReconcile(t.Context(), "ALI-OLD-NOTHING")
		return err == nil && st.GaveUpAt != nil
	}, 10*time.Second, 20*time.Millisecond)
	unresolved, err := r.St.Unresolved(t.Context(), 10)
	require.NoError(t, err)
	require.Len(t, unresolved, 1)
	require.Equal(t, "ALI-OLD-NOTHING", unresolved[0].Order)

	// An order written later with an older created_at than the walk's
	// position (an import), or given its payment_source late: the walk
	// starts over once it reaches the window, and asks it.
	r.order(t, "alipay", "ALI-IMPORTED", 100, 60*24*time.Hour)
	require.Eventually(t, func() bool {
		st, err := r.St.GetReconcile(t.Context(), "ALI-IMPORTED")
		return err == nil && st.GaveUpAt != nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, r.alipay.Asked("ALI-IMPORTED"))
	time.Sleep(500 * time.Millisecond) // more runs: the walk passes the orders given up on
	require.Equal(t, 1, r.alipay.Asked("ALI-OLD-NOTHING"), "asked once: its give_up was long past")
}
