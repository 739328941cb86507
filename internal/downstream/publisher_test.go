package downstream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/downstream"
	"callgate/internal/testenv"
)

type pubBundle struct {
	topo     broker.Topology
	pub      *downstream.Publisher
	admin    *testenv.Queue // reads the unrouted queue
	sub      *testenv.Queue // a subscriber bound to "somebody.listens"
	unrouted string
}

// setupOldExchange arranges a downstream exchange declared by an older
// callgate (no alternate exchange, no policy), the unrouted exchange and
// (when withQueue) its queue, a subscriber bound to "somebody.listens", and
// a publisher.
func setupOldExchange(t *testing.T, withQueue bool) *pubBundle {
	t.Helper()
	b := &pubBundle{topo: broker.Topology{Prefix: testenv.Prefix(t)}}
	b.unrouted = b.topo.UnroutedQueue()
	b.admin = testenv.OpenQueue(t, b.unrouted)
	ch := b.admin.Channel()
	require.NoError(t, ch.ExchangeDeclare(b.topo.DownstreamExchange(), amqp.ExchangeTopic, true, false, false, false, nil))
	require.NoError(t, ch.ExchangeDeclare(b.topo.UnroutedExchange(), amqp.ExchangeFanout, true, false, false, false, nil))
	if withQueue {
		_, err := ch.QueueDeclare(b.unrouted, true, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind(b.unrouted, "", b.topo.UnroutedExchange(), false, nil))
	}
	subName := b.topo.DownstreamExchange() + ".test"
	b.sub = testenv.OpenQueue(t, subName)
	_, err := b.sub.Channel().QueueDeclare(subName, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, b.sub.Channel().QueueBind(subName, "somebody.listens", b.topo.DownstreamExchange(), false, nil))

	conn := broker.NewConnection(broker.ConnectionConfig{URLs: []string{testenv.AMQPURL()}, Name: "publisher-test"}, testenv.Logger(t, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); conn.Run(ctx) }()
	b.pub = downstream.NewPublisher(conn, "publisher-test")
	t.Cleanup(func() { _ = b.pub.Close(); cancel(); <-done })
	_, err = conn.Wait(ctx)
	require.NoError(t, err)
	return b
}

func (b *pubBundle) message(key string, i int) downstream.Message {
	return downstream.Message{Exchange: b.topo.DownstreamExchange(), RoutingKey: key,
		MessageID: fmt.Sprintf("cb%d.%s", i, key), CorrelationID: fmt.Sprint(i),
		Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
}

// On an exchange without an alternate exchange, RabbitMQ returns what no
// queue is bound for; the publisher parks it in the unrouted queue and
// reports it confirmed only then. Batches published concurrently keep
// each return with its own message.
func TestPublisherParksReturnedNotifications(t *testing.T) {
	t.Parallel()
	b := setupOldExchange(t, true)
	const batches, perBatch = 8, 50
	var wg sync.WaitGroup
	for g := range batches {
		wg.Go(func() {
			msgs := make([]downstream.Message, perBatch)
			for i := range msgs {
				key := "somebody.listens"
				if i%3 == 0 {
					key = "nobody.listens"
				}
				msgs[i] = b.message(key, g*perBatch+i)
			}
			acked, err := b.pub.Publish(t.Context(), msgs)
			require.NoError(t, err)
			for i, ok := range acked {
				require.True(t, ok, msgs[i].MessageID)
			}
		})
	}
	wg.Wait()

	unrouted := b.admin.Drain(300 * time.Millisecond)
	routed := b.sub.Drain(300 * time.Millisecond)
	wantUnrouted := batches * ((perBatch + 2) / 3)
	require.Len(t, unrouted, wantUnrouted)
	require.Len(t, routed, batches*perBatch-wantUnrouted)
	for _, d := range unrouted {
		var i int
		_, err := fmt.Sscanf(d.MessageId, "cb%d.nobody.listens", &i)
		require.NoError(t, err, "only unroutable messages are parked: %s", d.MessageId)
		require.Equal(t, "nobody.listens", d.RoutingKey)
		require.Equal(t, "nobody.listens", d.Type)
		require.Equal(t, fmt.Sprint(i), d.CorrelationId)
		require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(d.Body))
		require.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", d.Headers["traceparent"])
		require.Equal(t, amqp.Persistent, d.DeliveryMode)
	}
	for _, d := range routed {
		require.Equal(t, "somebody.listens", d.RoutingKey)
	}
}

// With nowhere to park it either, an unroutable notification is not
// confirmed: it stays PENDING instead of being marked SENT while dropped.
func TestPublisherDoesNotConfirmWhatItCannotPark(t *testing.T) {
	t.Parallel()
	b := setupOldExchange(t, false)
	msgs := []downstream.Message{b.message("nobody.listens", 1), b.message("somebody.listens", 2)}
	acked, err := b.pub.Publish(t.Context(), msgs)
	require.ErrorIs(t, err, downstream.ErrUnroutable)
	require.Equal(t, []bool{false, true}, acked)
	d, ok := b.sub.Get(time.Second)
	require.True(t, ok)
	require.Equal(t, "cb2.somebody.listens", d.MessageId)

	// Once the unrouted queue is back, the next publish parks it.
	_, err = b.admin.Channel().QueueDeclare(b.unrouted, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, b.admin.Channel().QueueBind(b.unrouted, "", b.topo.UnroutedExchange(), false, nil))
	acked, err = b.pub.Publish(t.Context(), msgs[:1])
	require.NoError(t, err)
	require.Equal(t, []bool{true}, acked)
	d, ok = b.admin.Get(time.Second)
	require.True(t, ok)
	require.Equal(t, "cb1.nobody.listens", d.MessageId)
}
