package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/testenv"
)

type bundle struct {
	gw        *testenv.Gateway
	cfg       *config.Config
	payments  *testenv.Queue
	logistics *testenv.Queue
}

func setup(t *testing.T, mutate ...func(*config.Config)) *bundle {
	t.Helper()
	cfg := testenv.Config(t, mutate...)
	gw := testenv.StartGateway(t, cfg)
	if !strings.Contains(cfg.AMQP.URL, ":1/") {
		gw.WaitReady(t)
	}
	return &bundle{
		gw:        gw,
		cfg:       cfg,
		payments:  testenv.OpenQueue(t, cfg.AMQP.Prefix+".payment"),
		logistics: testenv.OpenQueue(t, cfg.AMQP.Prefix+".logistics"),
	}
}

func (b *bundle) row(t *testing.T, id int64) *callback.Log {
	t.Helper()
	l, err := testenv.Store(t, b.cfg).GetCallback(t.Context(), id)
	require.NoError(t, err)
	return l
}

func (b *bundle) count(t *testing.T) int {
	t.Helper()
	var n int64
	require.NoError(t, testenv.Store(t, b.cfg).DB.Table("callback_log").Count(&n).Error)
	return int(n)
}

func TestIntakePaymentStoredAndAnnounced(t *testing.T) {
	bothModes(t, testIntakePaymentStoredAndAnnounced)
}

func testIntakePaymentStoredAndAnnounced(t *testing.T, mode func(*config.Config)) {
	b := setup(t, mode)
	body := testenv.PaymentBody("ORD-1", "PAY-1", 1999)
	h := testenv.PaydemoHeaders(t, b.cfg, "msg_1", time.Now(), body)
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

	a := testenv.Post(t, b.gw.URL, "paydemo", body, h)
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	require.JSONEq(t, fmt.Sprintf(`{"status":"accepted","log_id":%d,"duplicate":false}`, a.LogID), string(a.Body))

	row := b.row(t, a.LogID)
	require.Equal(t, "paydemo", row.Source)
	require.Equal(t, "payment", row.Kind)
	require.Equal(t, "msg_1", row.EventID, "Standard Webhooks' webhook-id is the event id")
	require.Equal(t, "ORD-1", row.BusinessKey)
	require.Equal(t, callback.StatusPending, row.Status)
	require.Equal(t, body, row.Payload, "payload is stored byte for byte")
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", row.TraceID, "the platform's trace id is kept")
	var headers map[string]string
	require.NoError(t, json.Unmarshal(row.Headers, &headers))
	require.Equal(t, "msg_1", headers["Webhook-Id"])
	require.Equal(t, "application/json", headers["Content-Type"])
	require.WithinDuration(t, time.Now(), row.ReceivedAt, 10*time.Second)

	msg, ok := b.payments.Get(5 * time.Second)
	require.True(t, ok, "announcement on <prefix>.payment")
	require.JSONEq(t, fmt.Sprintf(`{"log_ids":[%d]}`, a.LogID), string(msg.Body))
	require.EqualValues(t, 2, msg.DeliveryMode, "persistent")
	tp, _ := msg.Headers["traceparent"].(string)
	require.Contains(t, tp, "4bf92f3577b34da6a3ce929d0e0e4736")
	require.Equal(t, 0, b.logistics.Depth(), "nothing on the other kind's queue")
}

func TestIntakeLogisticsEventIDFromFields(t *testing.T) {
	bothModes(t, testIntakeLogisticsEventIDFromFields)
}

func testIntakeLogisticsEventIDFromFields(t *testing.T, mode func(*config.Config)) {
	b := setup(t, mode)
	body := testenv.ShipmentBody("WB-9", "ORD-9", 3, "IN_TRANSIT")
	a := testenv.Post(t, b.gw.URL, "shipdemo", body, testenv.ShipdemoHeaders(t, b.cfg, body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	row := b.row(t, a.LogID)
	require.Equal(t, "WB-9:3", row.EventID, "event id is waybillNo:seq")
	require.Equal(t, "WB-9", row.BusinessKey)
	require.Len(t, row.TraceID, 32, "a fresh trace id when the platform sent none")

	msg, ok := b.logistics.Get(5 * time.Second)
	require.True(t, ok)
	require.JSONEq(t, fmt.Sprintf(`{"log_ids":[%d]}`, a.LogID), string(msg.Body))
	tp, _ := msg.Headers["traceparent"].(string)
	require.Contains(t, tp, row.TraceID)
}

func TestIntakeDuplicateSameAnswerNoNewRowNoMessage(t *testing.T) {
	bothModes(t, testIntakeDuplicateSameAnswerNoNewRowNoMessage)
}

func testIntakeDuplicateSameAnswerNoNewRowNoMessage(t *testing.T, mode func(*config.Config)) {
	b := setup(t, mode)
	body := testenv.PaymentBody("ORD-2", "PAY-2", 500)
	first := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, "msg_dup", time.Now(), body))
	require.Equal(t, http.StatusOK, first.Status)
	require.False(t, first.Duplicate)

	// The platform re-sends later, freshly signed.
	again := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, "msg_dup", time.Now().Add(time.Second), body))
	require.Equal(t, http.StatusOK, again.Status)
	require.JSONEq(t, fmt.Sprintf(`{"status":"accepted","log_id":%d,"duplicate":true}`, first.LogID), string(again.Body))

	require.Equal(t, 1, b.count(t))
	msgs := b.payments.Drain(time.Second)
	require.Len(t, msgs, 1, "a duplicate is not announced again")
}

func TestIntakeConcurrentDuplicatesOneRowOneMessage(t *testing.T) {
	bothModes(t, testIntakeConcurrentDuplicatesOneRowOneMessage)
}

func testIntakeConcurrentDuplicatesOneRowOneMessage(t *testing.T, mode func(*config.Config)) {
	b := setup(t, mode)
	body := testenv.PaymentBody("ORD-3", "PAY-3", 700)
	h := testenv.PaydemoHeaders(t, b.cfg, "msg_storm", time.Now(), body)

	const n = 50
	answers := make([]testenv.Answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = testenv.Post(t, b.gw.URL, "paydemo", body, h)
		})
	}
	close(start)
	wg.Wait()

	fresh := 0
	for _, a := range answers {
		require.Equal(t, http.StatusOK, a.Status, string(a.Body))
		require.Equal(t, answers[0].LogID, a.LogID, "every answer names the same row")
		if !a.Duplicate {
			fresh++
		}
	}
	require.Equal(t, 1, fresh, "exactly one answer says duplicate:false")
	require.Equal(t, 1, b.count(t))
	require.Len(t, b.payments.Drain(time.Second), 1)
}

func TestIntakeRefusals(t *testing.T) { bothModes(t, testIntakeRefusals) }

func testIntakeRefusals(t *testing.T, mode func(*config.Config)) {
	b := setup(t, mode, func(c *config.Config) {
		for i := range c.Sources {
			if c.Sources[i].Name == "shipdemo" {
				c.Sources[i].MaxBodyBytes = 256
			}
		}
	})
	now := time.Now()
	pay := func(body []byte) http.Header { return testenv.PaydemoHeaders(t, b.cfg, "msg_r", now, body) }
	ship := func(body []byte) http.Header { return testenv.ShipdemoHeaders(t, b.cfg, body) }
	valid := testenv.PaymentBody("ORD-4", "PAY-4", 1)
	tampered := bytes.Replace(valid, []byte(`"amount":1`), []byte(`"amount":9`), 1)
	exactly := func(n int) []byte { // a valid shipdemo body of exactly n bytes
		base := testenv.ShipmentBody("WB-L", "ORD-L", 1, "PICKED_UP")
		pad := n - len(base) - len(`,"pad":""`)
		return append(base[:len(base)-1], []byte(`,"pad":"`+strings.Repeat("x", pad)+`"}`)...)
	}

	cases := []struct {
		name   string
		source string
		body   []byte
		header http.Header
		status int
		reason string
	}{
		{"unknown source", "nosuch", valid, pay(valid), 404, "unknown source"},
		{"no signature", "paydemo", valid, http.Header{"Webhook-Id": {"msg_r"}, "Webhook-Timestamp": {fmt.Sprint(now.Unix())}}, 401, "webhook-signature"},
		{"wrong signature", "paydemo", tampered, pay(valid), 401, "signature"},
		{"expired timestamp", "paydemo", valid, testenv.PaydemoHeaders(t, b.cfg, "msg_r", now.Add(-6*time.Minute), valid), 401, "tolerance"},
		{"future timestamp", "paydemo", valid, testenv.PaydemoHeaders(t, b.cfg, "msg_r", now.Add(6*time.Minute), valid), 401, "tolerance"},
		{"hmac wrong secret", "shipdemo", testenv.ShipmentBody("WB-1", "O", 1, "PICKED_UP"), http.Header{"X-Signature": {strings.Repeat("ab", 32)}}, 401, "signature"},
		{"hmac missing header", "shipdemo", testenv.ShipmentBody("WB-1", "O", 1, "PICKED_UP"), http.Header{}, 401, "X-Signature"},
		{"not json", "paydemo", []byte("orderCode=1"), pay([]byte("orderCode=1")), 400, "JSON"},
		{"truncated json", "paydemo", valid[:len(valid)-5], pay(valid[:len(valid)-5]), 400, "JSON"},
		{"json array", "paydemo", []byte(`[1,2]`), pay([]byte(`[1,2]`)), 400, "JSON"},
		{"missing business key", "paydemo", []byte(`{"paymentNo":"P"}`), pay([]byte(`{"paymentNo":"P"}`)), 400, "orderCode"},
		{"empty business key", "paydemo", []byte(`{"orderCode":""}`), pay([]byte(`{"orderCode":""}`)), 400, "orderCode"},
		{"missing event id field", "shipdemo", []byte(`{"waybillNo":"WB-1"}`), ship([]byte(`{"waybillNo":"WB-1"}`)), 400, "seq"},
		{"object as key", "shipdemo", []byte(`{"waybillNo":{"a":1},"seq":1}`), ship([]byte(`{"waybillNo":{"a":1},"seq":1}`)), 400, "waybillNo"},
		{"over the limit by one byte", "shipdemo", exactly(257), ship(exactly(257)), 413, "size limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := testenv.Post(t, b.gw.URL, tc.source, tc.body, tc.header)
			require.Equal(t, tc.status, a.Status, string(a.Body))
			require.Contains(t, a.Error, tc.reason)
			require.NotContains(t, strings.ToLower(a.Error), "sql")
		})
	}
	require.Equal(t, 0, b.count(t), "no refused request leaves a row")
	require.Equal(t, 0, b.payments.Depth()+b.logistics.Depth(), "no refused request is announced")

	// The limit is inclusive: exactly max_body_bytes is accepted.
	at := exactly(256)
	require.Len(t, at, 256)
	a := testenv.Post(t, b.gw.URL, "shipdemo", at, ship(at))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
}

func TestIntakeBrokerDownStillAnswers200(t *testing.T) {
	bothModes(t, testIntakeBrokerDownStillAnswers200)
}

func testIntakeBrokerDownStillAnswers200(t *testing.T, mode func(*config.Config)) {
	b := setup(t, mode, func(c *config.Config) {
		c.AMQP.URL = "amqp://guest:guest@127.0.0.1:1/" // nothing listens there
	})
	body := testenv.PaymentBody("ORD-5", "PAY-5", 1)
	start := time.Now()
	a := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, "msg_nobroker", time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	require.Less(t, time.Since(start), 5*time.Second, "the broker is not on the request path")
	require.Equal(t, callback.StatusPending, b.row(t, a.LogID).Status)

	resp, err := http.Get(b.gw.URL + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var ready map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ready))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "ok", ready["mysql"])
	require.Equal(t, "unavailable", ready["rabbitmq"], "which dependency, never its error text (the broker's address)")
}

func TestIntakeBrokerReconnectsAndAnnounces(t *testing.T) {
	bothModes(t, testIntakeBrokerReconnectsAndAnnounces)
}

func testIntakeBrokerReconnectsAndAnnounces(t *testing.T, mode func(*config.Config)) {
	proxy := testenv.NewProxy(t, "127.0.0.1:5672")
	b := setup(t, mode, func(c *config.Config) {
		c.AMQP.URL = "amqp://guest:guest@" + proxy.Addr() + "/"
	})
	post := func(id string) testenv.Answer {
		body := testenv.PaymentBody("ORD-6", id, 1)
		a := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, id, time.Now(), body))
		require.Equal(t, http.StatusOK, a.Status, string(a.Body))
		return a
	}
	first := post("msg_before")
	_, ok := b.payments.Get(5 * time.Second)
	require.True(t, ok)

	proxy.Down() // drops the gateway's connection, refuses new ones
	during := post("msg_during")
	require.Equal(t, callback.StatusPending, b.row(t, during.LogID).Status)
	proxy.Up(t)

	after := post("msg_after")
	got := map[string]bool{}
	require.Eventually(t, func() bool {
		if d, ok := b.payments.Get(100 * time.Millisecond); ok {
			got[string(d.Body)] = true
		}
		return got[fmt.Sprintf(`{"log_ids":[%d]}`, after.LogID)]
	}, 15*time.Second, 20*time.Millisecond, "announcements resume after the broker comes back")
	require.NotEqual(t, first.LogID, after.LogID)
}

func TestIntakeMySQLDownAnswers503Fast(t *testing.T) { bothModes(t, testIntakeMySQLDownAnswers503Fast) }

func testIntakeMySQLDownAnswers503Fast(t *testing.T, mode func(*config.Config)) {
	proxy := testenv.NewProxy(t, "127.0.0.1:3306")
	b := setup(t, mode, func(c *config.Config) {
		c.MySQL.DSN = strings.Replace(c.MySQL.DSN, "127.0.0.1:3306", proxy.Addr(), 1)
	})
	body := testenv.PaymentBody("ORD-7", "PAY-7", 1)
	ok := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, "msg_ok", time.Now(), body))
	require.Equal(t, http.StatusOK, ok.Status)

	proxy.Down()
	for i := range 3 {
		start := time.Now()
		id := fmt.Sprintf("msg_down_%d", i)
		a := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, id, time.Now(), body))
		require.Equal(t, http.StatusServiceUnavailable, a.Status, string(a.Body))
		// Answered by the store timeout (2 s) at the latest, not held
		// until the server's 15 s write timeout: the bound leaves a loaded
		// machine 3 s of margin.
		require.Less(t, time.Since(start), 5*time.Second, "a 503 by the store timeout, not a hang")
		require.Equal(t, "storage temporarily unavailable, please retry", a.Error, "no internals leak")
	}
	resp, err := http.Get(b.gw.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	proxy.Up(t)
	require.Eventually(t, func() bool {
		a := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, "msg_back", time.Now(), body))
		return a.Status == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "intake recovers when MySQL is back")
}

func TestIntakeMySQLHungAnswers503WithinTimeout(t *testing.T) {
	bothModes(t, testIntakeMySQLHungAnswers503WithinTimeout)
}

func testIntakeMySQLHungAnswers503WithinTimeout(t *testing.T, mode func(*config.Config)) {
	proxy := testenv.NewProxy(t, "127.0.0.1:3306")
	b := setup(t, mode, func(c *config.Config) {
		c.MySQL.DSN = strings.Replace(c.MySQL.DSN, "127.0.0.1:3306", proxy.Addr(), 1)
		c.MySQL.IntakeTimeout = 500 * time.Millisecond
	})
	proxy.Hang(t)
	body := testenv.PaymentBody("ORD-8", "PAY-8", 1)
	start := time.Now()
	a := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, "msg_hang", time.Now(), body))
	require.Equal(t, http.StatusServiceUnavailable, a.Status, string(a.Body))
	// The store timeout (500 ms) answers, not the hung server nor the 15 s
	// write timeout; the bound leaves a loaded machine margin.
	require.Less(t, time.Since(start), 5*time.Second, "a 503 by the store timeout, not a hang")
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/nope": 404} {
		resp, err := http.Get(b.gw.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, path)
	}
	resp, err := http.Get(b.gw.URL + "/callbacks/paydemo")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// bothModes runs an intake test with group commit on (as shipped) and off
// (one INSERT per request): both must give the same answers.
func bothModes(t *testing.T, test func(t *testing.T, mode func(*config.Config))) {
	t.Parallel()
	for _, gc := range []bool{true, false} {
		name := "group_commit"
		if !gc {
			name = "per_request"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, func(c *config.Config) { c.MySQL.GroupCommit = gc })
		})
	}
}

// TestQuorumQueues: with amqp.queue_type quorum (for a RabbitMQ cluster)
// the queues are declared as quorum queues and callbacks flow through them.
func TestQuorumQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.AMQP.QueueType = broker.QueueTypeQuorum })
	body := testenv.PaymentBody("ORD-Q", "PAY-Q", 1)
	a := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, "msg_q", time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status)
	msg, ok := b.payments.Get(5 * time.Second)
	require.True(t, ok)
	require.JSONEq(t, fmt.Sprintf(`{"log_ids":[%d]}`, a.LogID), string(msg.Body))
	// Redeclaring as classic must fail: proof the queue really is quorum.
	_, err := b.payments.Channel().QueueDeclare(b.cfg.AMQP.Prefix+".payment", true, false, false, false,
		amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeClassic})
	require.ErrorContains(t, err, "PRECONDITION_FAILED")
}
