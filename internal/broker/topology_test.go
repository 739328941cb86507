package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/kinds"
	"callgate/internal/testenv"
)

// syncBuffer collects a logger's output written from the connection's
// goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// warnings returns the JSON log records of level WARN or above written so
// far.
func (b *syncBuffer) warnings(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["level"] == "WARN" || rec["level"] == "ERROR" {
			out = append(out, rec)
		}
	}
	return out
}

type topoBundle struct {
	topo broker.Topology
	// admin is a plain channel for arranging and inspecting the broker.
	admin *testenv.Queue
	logs  *syncBuffer
}

func setupTopology(t *testing.T, quorum bool) *topoBundle {
	t.Helper()
	logs := &syncBuffer{}
	b := &topoBundle{
		topo: broker.Topology{Prefix: testenv.Prefix(t), Kinds: kinds.Names(), Quorum: quorum,
			Log: slog.New(slog.NewJSONHandler(logs, nil))},
		logs: logs,
	}
	b.admin = testenv.OpenQueue(t, b.topo.UnroutedQueue())
	return b
}

// connect runs a broker.Connection that declares b.topo on every connect,
// and waits until it is up.
func (b *topoBundle) connect(t *testing.T) *broker.Connection {
	t.Helper()
	conn := broker.NewConnection(broker.ConnectionConfig{URLs: []string{testenv.AMQPURL()}, Name: "topology-test",
		Setup: b.topo.Declare, ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second}, b.topo.Log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); conn.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	_, err := conn.Wait(wctx)
	require.NoError(t, err, "connected, topology declared")
	return conn
}

// subscribe binds a queue <prefix>.downstream.test to the downstream
// exchange for key, as a subscriber would.
func (b *topoBundle) subscribe(t *testing.T, key string) *testenv.Queue {
	t.Helper()
	q := testenv.OpenQueue(t, b.topo.DownstreamExchange()+".test")
	_, err := q.Channel().QueueDeclare(b.topo.DownstreamExchange()+".test", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, q.Channel().QueueBind(b.topo.DownstreamExchange()+".test", key, b.topo.DownstreamExchange(), false, nil))
	return q
}

// publish sends a persistent message to the downstream exchange as any
// publisher would: not mandatory, so only the broker can keep it.
func (b *topoBundle) publish(t *testing.T, key, id, body string) {
	t.Helper()
	require.NoError(t, b.admin.Channel().PublishWithContext(t.Context(), b.topo.DownstreamExchange(), key, false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, ContentType: "application/json", MessageId: id, Body: []byte(body)}))
}

// declareOldDownstream declares <prefix>.downstream as callgate did before
// it had an alternate exchange.
func (b *topoBundle) declareOldDownstream(t *testing.T) {
	t.Helper()
	require.NoError(t, b.admin.Channel().ExchangeDeclare(b.topo.DownstreamExchange(), amqp.ExchangeTopic, true, false, false, false, nil))
}

func TestDeclareKeepsUnroutedNotifications(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		quorum bool
	}{{"classic", false}, {"quorum", true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupTopology(t, tt.quorum)
			conn := b.connect(t)
			sub := b.subscribe(t, "somebody.listens")

			b.publish(t, "nobody.listens", "m-unrouted", `{"n":1}`)
			b.publish(t, "somebody.listens", "m-routed", `{"n":2}`)

			require.Eventually(t, func() bool { return b.admin.Depth() == 1 }, 5*time.Second, 20*time.Millisecond, "the unroutable message is kept")
			n, err := b.topo.UnroutedDepth(conn)
			require.NoError(t, err)
			require.Equal(t, 1, n)

			d, ok := b.admin.Get(time.Second)
			require.True(t, ok)
			require.Equal(t, "m-unrouted", d.MessageId)
			require.Equal(t, "nobody.listens", d.RoutingKey, "the routing key survives the detour")
			require.Equal(t, b.topo.DownstreamExchange(), d.Exchange)
			require.JSONEq(t, `{"n":1}`, string(d.Body))
			require.Equal(t, amqp.Persistent, d.DeliveryMode)

			d, ok = sub.Get(time.Second)
			require.True(t, ok)
			require.Equal(t, "m-routed", d.MessageId, "a bound key still reaches its queue")
			_, ok = b.admin.Get(200 * time.Millisecond)
			require.False(t, ok, "and not the unrouted one")
			require.Empty(t, b.logs.warnings(t), "nothing to warn about on a fresh installation")
		})
	}
}

func TestDeclareOnOldDownstreamExchangeKeepsConnecting(t *testing.T) {
	t.Parallel()
	b := setupTopology(t, false)
	b.declareOldDownstream(t)
	sub := b.subscribe(t, "somebody.listens") // a subscriber's binding, to be kept

	conn := b.connect(t) // fails after 10 s if the 406 stops the connect

	warns := b.logs.warnings(t)
	require.Len(t, warns, 1, "one warning for the connect: %v", warns)
	w := warns[0]
	require.Equal(t, b.topo.DownstreamExchange(), w["exchange"])
	require.Equal(t, b.topo.UnroutedExchange(), w["alternate_exchange"])
	require.Equal(t, `rabbitmqctl set_policy `+b.topo.Prefix+`-downstream-unrouted '^`+b.topo.Prefix+`[.]downstream$' `+
		`'{"alternate-exchange":"`+b.topo.Prefix+`.downstream.unrouted"}' --apply-to exchanges`, w["fix"])
	require.Contains(t, w["error"], "inequivalent arg 'alternate-exchange'")

	// Everything else is declared: the kinds' queues and the unrouted queue.
	for _, kind := range kinds.Names() {
		_, err := b.topo.QueueDepth(conn, kind)
		require.NoError(t, err, kind)
	}
	n, err := b.topo.UnroutedDepth(conn)
	require.NoError(t, err)
	require.Zero(t, n)

	// The old exchange still routes, with its bindings.
	b.publish(t, "somebody.listens", "m-routed", `{}`)
	d, ok := sub.Get(2 * time.Second)
	require.True(t, ok)
	require.Equal(t, "m-routed", d.MessageId)

	// Every later connect declares it again without failing.
	c, err := conn.Current()
	require.NoError(t, err)
	require.NoError(t, b.topo.Declare(c))
}

func TestDeclareStillRefusesAnotherDownstreamType(t *testing.T) {
	t.Parallel()
	b := setupTopology(t, false)
	// Not a missing alternate exchange: nothing callgate can work with.
	require.NoError(t, b.admin.Channel().ExchangeDeclare(b.topo.DownstreamExchange(), amqp.ExchangeDirect, true, false, false, false, nil))
	c, err := amqp.Dial(testenv.AMQPURL())
	require.NoError(t, err)
	defer c.Close()
	err = b.topo.Declare(c)
	require.ErrorContains(t, err, "inequivalent arg 'type'")
}

// TestUnroutedQueueIsLazy: a fresh classic unrouted queue is lazy (its
// notifications on disk, not in the broker's memory): RabbitMQ refuses to
// redeclare it without the argument.
func TestUnroutedQueueIsLazy(t *testing.T) {
	t.Parallel()
	b := setupTopology(t, false)
	b.connect(t)
	require.Empty(t, b.logs.warnings(t))
	c, err := amqp.Dial(testenv.AMQPURL())
	require.NoError(t, err)
	defer c.Close()
	ch, err := c.Channel()
	require.NoError(t, err)
	args := b.topo.UnroutedQueueArgs()
	delete(args, "x-queue-mode")
	_, err = ch.QueueDeclare(b.topo.UnroutedQueue(), true, false, false, false, args)
	require.ErrorContains(t, err, "inequivalent arg 'x-queue-mode'")
	require.ErrorContains(t, err, "current is the value 'lazy'")
}

// TestUnroutedQueueIsBounded: the parking lot keeps at most its bound,
// dropping the oldest, so a subscriber that unbinds cannot fill the
// broker until its alarms block the intake's announcements; the newest
// stay, in order, and a publisher is never refused.
func TestUnroutedQueueIsBounded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		quorum bool
	}{{"classic", false}, {"quorum", true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupTopology(t, tt.quorum)
			b.topo.UnroutedMaxLength = 3
			conn := b.connect(t)
			// Confirmed publishes: each is in the queue (or dropped from
			// it) when its confirm arrives.
			c, err := amqp.Dial(testenv.AMQPURL())
			require.NoError(t, err)
			defer c.Close()
			ch, err := c.Channel()
			require.NoError(t, err)
			require.NoError(t, ch.Confirm(false))
			for i := 1; i <= 5; i++ {
				dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), b.topo.DownstreamExchange(), "nobody.listens", false, false,
					amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: fmt.Sprintf("m-%d", i), Body: []byte(`{}`)})
				require.NoError(t, err)
				ok, err := dc.WaitContext(t.Context())
				require.NoError(t, err)
				require.True(t, ok, "never refused: m-%d", i)
			}
			n, err := b.topo.UnroutedDepth(conn)
			require.NoError(t, err)
			require.Equal(t, 3, n)
			for _, want := range []string{"m-3", "m-4", "m-5"} {
				d, ok := b.admin.Get(time.Second)
				require.True(t, ok, want)
				require.Equal(t, want, d.MessageId)
			}
		})
	}
}

// TestDeclareKeepsAnOldUnroutedQueue: an unrouted queue declared by an
// older callgate (unbounded: not lazy, or lazy without a bound) does not
// stop the connect: one warning names the policy that bounds it (and makes
// it lazy), everything else is declared, and the old queue still keeps
// what no subscriber is bound for.
func TestDeclareKeepsAnOldUnroutedQueue(t *testing.T) {
	t.Parallel()
	for _, old := range []struct {
		name string
		args amqp.Table
	}{
		{"not lazy", amqp.Table{"x-queue-type": "classic"}},
		{"lazy, unbounded", amqp.Table{"x-queue-type": "classic", "x-queue-mode": "lazy"}},
	} {
		t.Run(old.name, func(t *testing.T) {
			t.Parallel()
			keepsAnOldUnroutedQueue(t, old.args)
		})
	}
}

func keepsAnOldUnroutedQueue(t *testing.T, oldArgs amqp.Table) {
	b := setupTopology(t, false)
	_, err := b.admin.Channel().QueueDeclare(b.topo.UnroutedQueue(), true, false, false, false, oldArgs)
	require.NoError(t, err)

	conn := b.connect(t) // fails after 10 s if the 406 stops the connect

	warns := b.logs.warnings(t)
	require.Len(t, warns, 1, "one warning for the connect: %v", warns)
	require.Equal(t, b.topo.UnroutedQueue(), warns[0]["queue"])
	require.Equal(t, `rabbitmqctl set_policy `+b.topo.Prefix+`-unrouted-queue '^`+b.topo.Prefix+`[.]downstream[.]unrouted$' `+
		`'{"queue-mode":"lazy","max-length":100000,"max-length-bytes":268435456,"overflow":"drop-head"}' --priority 1 --apply-to queues`, warns[0]["fix"])
	for _, kind := range kinds.Names() {
		_, err := b.topo.QueueDepth(conn, kind)
		require.NoError(t, err, kind)
	}
	b.publish(t, "nobody.listens", "m-parked", `{}`)
	require.Eventually(t, func() bool {
		n, err := b.topo.UnroutedDepth(conn)
		return err == nil && n == 1
	}, 5*time.Second, 50*time.Millisecond, "the old queue keeps unrouted notifications")
}

// TestUnroutedPolicyFixesOldExchange runs the fix the warning names, as an
// operator would, and checks RabbitMQ then keeps what no queue is bound
// for on the old exchange (published without mandatory, as by any
// publisher).
func TestUnroutedPolicyFixesOldExchange(t *testing.T) {
	if _, err := exec.LookPath("rabbitmqctl"); err != nil || testenv.AMQPURL() != broker.URLDefault {
		t.Skip("needs rabbitmqctl for the local broker")
	}
	t.Parallel()
	b := setupTopology(t, false)
	b.declareOldDownstream(t)
	b.connect(t)

	policy := b.topo.Prefix + "-downstream-unrouted"
	t.Cleanup(func() { _ = exec.Command("rabbitmqctl", "clear_policy", policy).Run() })
	out, err := exec.Command("sh", "-c", b.topo.UnroutedPolicy()).CombinedOutput()
	require.NoError(t, err, "%s", out)

	// A policy takes effect shortly after rabbitmqctl returns: publish
	// until one is kept.
	var d amqp.Delivery
	require.Eventually(t, func() bool {
		b.publish(t, "nobody.listens", "m-unrouted", `{"n":1}`)
		var ok bool
		d, ok = b.admin.Get(200 * time.Millisecond)
		return ok
	}, 10*time.Second, 20*time.Millisecond, "the policy's alternate exchange keeps the message")
	require.Equal(t, "m-unrouted", d.MessageId)
	require.Equal(t, "nobody.listens", d.RoutingKey)
}

// TestUnroutedQueuePolicyBoundsAnOldQueue runs the fix the warning names
// for an old, unbounded unrouted queue, as an operator would, and checks
// that the queue then keeps at most its bound.
func TestUnroutedQueuePolicyBoundsAnOldQueue(t *testing.T) {
	if _, err := exec.LookPath("rabbitmqctl"); err != nil || testenv.AMQPURL() != broker.URLDefault {
		t.Skip("needs rabbitmqctl for the local broker")
	}
	t.Parallel()
	b := setupTopology(t, false)
	b.topo.UnroutedMaxLength = 2
	_, err := b.admin.Channel().QueueDeclare(b.topo.UnroutedQueue(), true, false, false, false, amqp.Table{"x-queue-type": "classic"})
	require.NoError(t, err)
	conn := b.connect(t)

	policy := b.topo.Prefix + "-unrouted-queue"
	t.Cleanup(func() { _ = exec.Command("rabbitmqctl", "clear_policy", policy).Run() })
	out, err := exec.Command("sh", "-c", b.topo.UnroutedQueuePolicy()).CombinedOutput()
	require.NoError(t, err, "%s", out)

	// A policy takes effect shortly after rabbitmqctl returns: publish
	// until the queue stays at its bound.
	i := 0
	require.Eventually(t, func() bool {
		for range 3 {
			i++
			b.publish(t, "nobody.listens", fmt.Sprintf("m-%d", i), `{}`)
		}
		n, err := b.topo.UnroutedDepth(conn)
		return err == nil && n == 2
	}, 10*time.Second, 100*time.Millisecond, "the policy bounds the old queue")
}
