package testenv

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/config"
	"callgate/internal/kinds"
)

// Queue reads messages from one queue of the real broker, the way a
// downstream system would.
type Queue struct {
	t    testing.TB
	conn *amqp.Connection
	ch   *amqp.Channel
	name string
}

// OpenQueue connects to the broker for reading queue.
func OpenQueue(t testing.TB, queue string) *Queue {
	t.Helper()
	conn, err := amqp.Dial(AMQPURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	return &Queue{t: t, conn: conn, ch: ch, name: queue}
}

// Channel exposes the channel (to declare and bind test queues).
func (q *Queue) Channel() *amqp.Channel { return q.channel() }

// channel reopens the channel after an error closed it (a Get on a queue
// not declared yet closes the channel).
func (q *Queue) channel() *amqp.Channel {
	if q.ch.IsClosed() {
		ch, err := q.conn.Channel()
		require.NoError(q.t, err)
		q.ch = ch
	}
	return q.ch
}

// Get returns the next message, waiting up to timeout, or false.
func (q *Queue) Get(timeout time.Duration) (amqp.Delivery, bool) {
	q.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d, ok, err := q.channel().Get(q.name, true)
		if err == nil && ok {
			return d, true
		}
		if time.Now().After(deadline) {
			return amqp.Delivery{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Drain reads every message that arrives until none has for quiet.
func (q *Queue) Drain(quiet time.Duration) []amqp.Delivery {
	q.t.Helper()
	var out []amqp.Delivery
	for {
		d, ok := q.Get(quiet)
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// Depth is the number of ready messages in the queue.
func (q *Queue) Depth() int {
	q.t.Helper()
	info, err := q.channel().QueueDeclarePassive(q.name, true, false, false, false, nil)
	if err != nil {
		return -1
	}
	return info.Messages
}

// Announcer runs a real broker connection (declaring cfg's topology) and
// announcer until the test ends, and returns the announcer and the
// connection.
func Announcer(t testing.TB, cfg *config.Config) (*broker.Announcer, *broker.Connection) {
	t.Helper()
	topo := broker.NewTopology(cfg.AMQP, kinds.Names())
	log := Logger(t, cfg)
	conn := broker.NewConnection(broker.ConnectionConfig{URLs: cfg.AMQP.Nodes(), Name: "test", Setup: topo.Declare,
		ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second}, log)
	ctx, cancel := context.WithCancel(context.Background())
	connDone := make(chan struct{})
	go func() { defer close(connDone); conn.Run(ctx) }()
	ann := broker.NewAnnouncer(broker.AnnouncerConfig{Exchange: topo.CallbacksExchange(), Buffer: 1000, Window: 64}, conn, log)
	go ann.Run(ctx, time.Second)
	t.Cleanup(func() { cancel(); <-ann.Done(); <-connDone })
	_, err := conn.Wait(ctx)
	require.NoError(t, err)
	return ann, conn
}
