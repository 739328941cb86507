package scheduler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/kinds"
	"callgate/internal/metrics"
	"callgate/internal/scheduler"
	"callgate/internal/testenv"
)

// TestGaugesCountUnroutedNotifications: the gauges job exports the depth
// of <prefix>.downstream.unrouted, and while the broker cannot answer it
// keeps the last value, still refreshes the MySQL figures and reports why.
func TestGaugesCountUnroutedNotifications(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	_, conn := testenv.Announcer(t, cfg)
	topo := broker.Topology{Prefix: cfg.AMQP.Prefix, Kinds: kinds.Names()}
	q := testenv.OpenQueue(t, topo.UnroutedQueue())
	for i := range 3 {
		require.NoError(t, q.Channel().PublishWithContext(t.Context(), topo.DownstreamExchange(), "nobody.listens", false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: fmt.Sprintf("cb%d.nobody.listens", i), Body: []byte(`{}`)}))
	}
	require.Eventually(t, func() bool { return q.Depth() == 3 }, 5*time.Second, 20*time.Millisecond)

	m := metrics.New("worker")
	depth := func() (int, error) { return topo.UnroutedDepth(conn) }
	g := &scheduler.Gauges{Store: st.Store, Metrics: m, Sources: []string{"paydemo"}, UnroutedDepth: func() (int, error) { return depth() }}
	require.NoError(t, g.RunOnce(t.Context()))
	require.InDelta(t, 3, testutil.ToFloat64(m.DownstreamUnrouted), 0)

	require.NoError(t, st.DB.Exec(`INSERT INTO outbox (callback_log_id, exchange, routing_key, message_id, payload, status, created_at)
		VALUES (1, 'x', 'k', 'cb1.k', '{}', 'PENDING', NOW(6))`).Error)
	depth = func() (int, error) { return 0, broker.ErrNotConnected }
	err := g.RunOnce(t.Context())
	require.ErrorIs(t, err, broker.ErrNotConnected)
	require.InDelta(t, 3, testutil.ToFloat64(m.DownstreamUnrouted), 0, "the last value stays")
	require.InDelta(t, 1, testutil.ToFloat64(m.OutboxPending), 0, "the MySQL figures are refreshed anyway")
}
