package tail_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/downstream"
	"callgate/internal/tail"
	"callgate/internal/testenv"
)

// TestTailPrintsMatchingNotifications: `worker tail --routing-key
// points.*` prints a notification the worker's publisher sends with that
// routing key, every field of it, and not one with another key; Ctrl-C
// (the context) ends it with status 0 and its queue goes away.
func TestTailPrintsMatchingNotifications(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	_, conn := testenv.Announcer(t, cfg) // declares the topology, as the worker does
	pub := downstream.NewPublisher(conn, "test")
	t.Cleanup(func() { _ = pub.Close() })
	exchange := broker.Topology{Prefix: cfg.AMQP.Prefix}.DownstreamExchange()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- tail.Command(ctx, []string{"--routing-key", "points.*"}, cfg.AMQP.Nodes(), exchange, &stdout, &stderr)
	}()
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "tail: queue ") }, 10*time.Second, 20*time.Millisecond,
		"tail did not bind its queue")
	queue := strings.Fields(strings.TrimPrefix(stderr.String(), "tail: queue "))[0]

	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	acked, err := pub.Publish(t.Context(), []downstream.Message{
		// Published first: had it matched, it would be printed first.
		{Exchange: exchange, RoutingKey: "warehouse.ship", MessageID: "cb7.warehouse.ship", CorrelationID: "7",
			Payload: []byte(`{"orderCode":"ORD-7"}`), Headers: map[string]string{"traceparent": traceparent}},
		{Exchange: exchange, RoutingKey: "points.add", MessageID: "cb7.points.add", CorrelationID: "7",
			Payload: []byte(`{"orderCode":"ORD-7","userId":42,"amount":1999}`), Headers: map[string]string{"traceparent": traceparent}},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, acked)

	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "cb7.points.add") }, 10*time.Second, 20*time.Millisecond,
		"the matching notification was not printed:\n%s", stdout.String())
	want := "routing_key:    points.add\n" +
		"message_id:     cb7.points.add\n" +
		"correlation_id: 7\n" +
		"traceparent:    " + traceparent + "\n" +
		`body:           {"orderCode":"ORD-7","userId":42,"amount":1999}` + "\n\n"
	require.Equal(t, want, stdout.String(), "only the points.* notification, every field")

	cancel()
	select {
	case c := <-code:
		require.Equal(t, 0, c, "exit status after Ctrl-C\n%s", stderr.String())
	case <-time.After(10 * time.Second):
		require.FailNow(t, "tail did not stop")
	}
	require.Contains(t, stderr.String(), "tail: stopped")
	q := testenv.OpenQueue(t, queue)
	require.Eventually(t, func() bool {
		_, err := q.Channel().QueueDeclarePassive(queue, false, true, true, false, nil)
		var amqpErr *amqp.Error
		return errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound
	}, 10*time.Second, 20*time.Millisecond, "queue %s left behind", queue)
}

// TestTailUnknownExchange: a wrong prefix is an error that names the
// exchange and the setting, not a silent wait.
func TestTailUnknownExchange(t *testing.T) {
	t.Parallel()
	var stdout, stderr testenv.SyncBuffer
	code := tail.Command(t.Context(), nil, []string{testenv.AMQPURL()}, "no-such-prefix-"+testenv.Suffix()+".downstream", &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "no exchange no-such-prefix-")
	require.Contains(t, stderr.String(), "CALLGATE_AMQP_PREFIX")
	require.Empty(t, stdout.String())
}

// TestTailUsage: arguments it does not know are refused with the usage.
func TestTailUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--routing-key", ""}, {"--nope"}, {"extra"}} {
		var stdout, stderr testenv.SyncBuffer
		require.Equal(t, 2, tail.Command(t.Context(), args, []string{testenv.AMQPURL()}, "x.downstream", &stdout, &stderr), "%v", args)
		require.Contains(t, stderr.String(), "usage: worker [-config PATH] tail", "%v", args)
	}
}
