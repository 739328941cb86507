package worker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/logistics"
	"callgate/internal/outbox"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// The end-to-end tests of the unrouted queue use only what existed before
// it (names, HTTP answers), so that they run, and fail, on a callgate
// without it.

const unroutedToken = "ops-token-unrouted-0123"

type unroutedEnv struct {
	cfg      *config.Config
	gw       *testenv.Gateway
	metrics  string         // the worker's /metrics URL
	sub      *testenv.Queue // a subscriber bound to "somebody.listens" only
	unrouted *testenv.Queue // <prefix>.downstream.unrouted
}

// notifying is a payment handler that emits one notification nobody is
// bound for and one a subscriber is bound for.
func notifying() worker.Options {
	reg := callback.NewRegistry()
	reg.Register(callback.KindPayment, callback.HandlerFunc(func(ctx context.Context, _ *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		for _, key := range []string{"nobody.listens", "somebody.listens"} {
			if err := out.Add(ctx, callback.Message{RoutingKey: key, Payload: map[string]any{"orderCode": cb.BusinessKey, "key": key}}); err != nil {
				return err
			}
		}
		return nil
	}))
	reg.Register(callback.KindLogistics, logistics.Handler{})
	return worker.Options{Registry: reg}
}

// setupUnrouted starts a gateway and a worker running notifying(); before
// them, arrange (optional) may prepare the broker.
func setupUnrouted(t *testing.T, arrange func(ch *amqp.Channel, prefix string)) *unroutedEnv {
	t.Helper()
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Admin.Token = "ops:" + unroutedToken
		c.Scheduler.Gauges.Interval = 100 * time.Millisecond
	})
	prefix := cfg.AMQP.Prefix
	e := &unroutedEnv{cfg: cfg}
	e.unrouted = testenv.OpenQueue(t, prefix+".downstream.unrouted")
	if arrange != nil {
		arrange(e.unrouted.Channel(), prefix)
	}
	e.gw = testenv.StartGateway(t, cfg)
	e.gw.WaitReady(t)

	// A subscriber bound to one key (the exchange exists: the gateway
	// declared it, or arrange did).
	subName := prefix + ".downstream.test"
	e.sub = testenv.OpenQueue(t, subName)
	_, err := e.sub.Channel().QueueDeclare(subName, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, e.sub.Channel().QueueBind(subName, "somebody.listens", prefix+".downstream", false, nil))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e.metrics = "http://" + ln.Addr().String() + "/metrics"
	opts := notifying()
	opts.MetricsListener = ln
	testenv.StartWorker(t, cfg, opts)
	return e
}

// pay posts a signed payment callback and waits until it is SUCCESS with
// every outbox row SENT; it returns the log id.
func (e *unroutedEnv) pay(t *testing.T, order string) int64 {
	t.Helper()
	body := testenv.PaymentBody(order, "PAY-"+order, 1000)
	a := testenv.Post(t, e.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, e.cfg, "msg_"+order, time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	st := testenv.Store(t, e.cfg)
	require.Eventually(t, func() bool {
		var rows []outbox.Row
		require.NoError(t, st.DB.Where("callback_log_id = ?", a.LogID).Find(&rows).Error)
		sent := 0
		for _, r := range rows {
			if r.Status == outbox.StatusSent {
				sent++
			}
		}
		return len(rows) == 2 && sent == 2
	}, 20*time.Second, 20*time.Millisecond, "both notifications of callback %d published and marked SENT", a.LogID)
	return a.LogID
}

// gauge reads callgate_downstream_unrouted_messages from the worker's
// /metrics (-1 if absent).
func (e *unroutedEnv) gauge(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get(e.metrics)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "callgate_downstream_unrouted_messages{") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			return v
		}
	}
	return -1
}

// stats reads GET /admin/api/stats.
func (e *unroutedEnv) stats(t *testing.T) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.gw.URL+"/admin/api/stats", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+unroutedToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// requireKept checks that the notification nobody is bound for waits in
// the unrouted queue, is counted on /metrics and by the console, and is
// intact; and that the bound one reached its subscriber only.
func (e *unroutedEnv) requireKept(t *testing.T, logID int64, order, viaExchange string) {
	t.Helper()
	require.Eventually(t, func() bool { return e.unrouted.Depth() == 1 }, 5*time.Second, 20*time.Millisecond,
		"the notification nobody is bound for is kept in %s.downstream.unrouted (depth %d)", e.cfg.AMQP.Prefix, e.unrouted.Depth())
	require.Eventually(t, func() bool { return e.gauge(t) == 1 }, 5*time.Second, 20*time.Millisecond,
		"callgate_downstream_unrouted_messages counts it (got %v)", e.gauge(t))
	require.EqualValues(t, 1, e.stats(t)["downstream_unrouted"], "the console's stats count it")

	id := strconv.FormatInt(logID, 10)
	d, ok := e.unrouted.Get(time.Second)
	require.True(t, ok)
	require.Equal(t, "cb"+id+".nobody.listens", d.MessageId)
	require.Equal(t, "nobody.listens", d.RoutingKey)
	require.Equal(t, viaExchange, d.Exchange)
	require.Equal(t, id, d.CorrelationId)
	require.Equal(t, amqp.Persistent, d.DeliveryMode)
	require.Contains(t, d.Headers["traceparent"], "-")
	require.JSONEq(t, fmt.Sprintf(`{"orderCode":%q,"key":"nobody.listens"}`, order), string(d.Body))
	_, ok = e.unrouted.Get(300 * time.Millisecond)
	require.False(t, ok, "only the notification nobody is bound for")

	routed := e.sub.Drain(500 * time.Millisecond)
	require.Len(t, routed, 1)
	require.Equal(t, "cb"+id+".somebody.listens", routed[0].MessageId, "a bound notification reaches its subscriber")
	require.JSONEq(t, fmt.Sprintf(`{"orderCode":%q,"key":"somebody.listens"}`, order), string(routed[0].Body))

	require.Eventually(t, func() bool { return e.gauge(t) == 0 }, 5*time.Second, 20*time.Millisecond, "the gauge follows the queue once an operator read it")
}

func TestUnroutedNotificationIsKeptForAnOperator(t *testing.T) {
	t.Parallel()
	e := setupUnrouted(t, nil)
	id := e.pay(t, "ORD-UNROUTED-1")
	// RabbitMQ itself diverts it through the alternate exchange.
	e.requireKept(t, id, "ORD-UNROUTED-1", e.cfg.AMQP.Prefix+".downstream")
}

// An installation whose downstream exchange an older callgate declared
// (no alternate exchange, no policy): the processes still connect, and the
// worker parks the broker's returns in the unrouted queue itself.
func TestUnroutedNotificationIsKeptOnAnOldDownstreamExchange(t *testing.T) {
	t.Parallel()
	e := setupUnrouted(t, func(ch *amqp.Channel, prefix string) {
		require.NoError(t, ch.ExchangeDeclare(prefix+".downstream", amqp.ExchangeTopic, true, false, false, false, nil))
	})
	id := e.pay(t, "ORD-UNROUTED-OLD")
	e.requireKept(t, id, "ORD-UNROUTED-OLD", e.cfg.AMQP.Prefix+".downstream.unrouted")
}
