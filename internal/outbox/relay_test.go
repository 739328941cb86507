package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/config"
	"callgate/internal/downstream"
	"callgate/internal/kinds"
	"callgate/internal/outbox"
	"callgate/internal/testenv"
)

// connect runs a broker.Connection to url with the worker's topology, as
// worker.Run builds it, until the test ends, and waits for it to be up.
func connect(t *testing.T, cfg *config.Config, url string) *broker.Connection {
	t.Helper()
	topo := broker.NewTopology(cfg.AMQP, kinds.Names())
	conn := broker.NewConnection(broker.ConnectionConfig{
		URLs:         []string{url},
		Name:         "callgate-relay-test",
		ReconnectMin: cfg.AMQP.ReconnectMin,
		ReconnectMax: cfg.AMQP.ReconnectMax,
		Setup:        topo.Declare,
	}, testenv.Logger(t, cfg))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); conn.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	_, err := conn.Wait(wctx)
	require.NoError(t, err, "broker connection")
	return conn
}

// insertPending writes n PENDING outbox rows created a minute ago (old
// enough for any relay), with message ids <tag>-<i> and callback log ids
// firstLogID.., in one multi-row INSERT per 500 rows.
func insertPending(t *testing.T, st *testenv.TestStore, cfg *config.Config, tag string, firstLogID int64, n int) {
	t.Helper()
	created := time.Now().UTC().Add(-time.Minute)
	rows := make([]outbox.Row, n)
	for i := range rows {
		rows[i] = outbox.Row{
			CallbackLogID: firstLogID + int64(i),
			Exchange:      cfg.AMQP.Prefix + ".downstream",
			RoutingKey:    "test.msg",
			MessageID:     fmt.Sprintf("%s-%d", tag, i),
			Payload:       []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Status:        outbox.StatusPending,
			CreatedAt:     created,
		}
	}
	require.NoError(t, st.DB.CreateInBatches(rows, 500).Error)
}

func loadRows(t *testing.T, st *testenv.TestStore) []outbox.Row {
	t.Helper()
	var rows []outbox.Row
	require.NoError(t, st.DB.Order("id").Find(&rows).Error)
	return rows
}

// TestTwoRelaysNeverClaimTheSameRowInAPass: two relays (two workers) drain
// the same outbox at the same time; FOR UPDATE SKIP LOCKED gives every row
// to exactly one of them.
func TestTwoRelaysNeverClaimTheSameRowInAPass(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	conn := connect(t, cfg, cfg.AMQP.URL)
	down := testenv.Downstream(t, cfg)

	const total = 1000
	insertPending(t, st, cfg, "msg", 1, total)

	log := testenv.Logger(t, cfg)
	rcfg := outbox.RelayConfig{BatchSize: 50, MinAge: time.Second}
	var relays []*outbox.Relay
	for i := range 2 {
		pub := downstream.NewPublisher(conn, "relay-test-"+strconv.Itoa(i))
		t.Cleanup(func() { _ = pub.Close() })
		relays = append(relays, outbox.NewRelay(rcfg, st.Store, pub, log))
	}

	counts := make([]int, len(relays))
	errs := make([]error, len(relays))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range relays {
		wg.Go(func() {
			<-start
			counts[i], errs[i] = r.RunOnce(t.Context())
		})
	}
	close(start)
	wg.Wait()
	for i := range relays {
		require.NoError(t, errs[i], "relay %d", i)
	}
	t.Logf("relay counts: %v", counts)
	require.Equal(t, total, counts[0]+counts[1], "together the relays sent every row exactly once")

	rows := loadRows(t, st)
	require.Len(t, rows, total)
	for _, r := range rows {
		require.Equal(t, outbox.StatusSent, r.Status, "row %s", r.MessageID)
		require.Equal(t, 1, r.Attempts, "row %s was claimed more than once", r.MessageID)
		require.NotNil(t, r.SentAt, "row %s", r.MessageID)
	}

	require.Eventually(t, func() bool { return down.Depth() >= total }, 10*time.Second, 20*time.Millisecond, "downstream got the messages")
	msgs := down.Drain(300 * time.Millisecond)
	require.Len(t, msgs, total, "exactly one message per row")
	ids := map[string]bool{}
	for _, m := range msgs {
		require.False(t, ids[m.MessageId], "message %s published twice", m.MessageId)
		ids[m.MessageId] = true
		require.NotEmpty(t, m.CorrelationId, "message %s has no correlation id", m.MessageId)
		require.Equal(t, "test.msg", m.RoutingKey)
	}
	require.Len(t, ids, total)
}

// TestRelayDeliversAfterBrokerOutage: while the broker is unreachable a
// pass sends nothing and loses nothing; once it is back the next pass
// delivers everything.
func TestRelayDeliversAfterBrokerOutage(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	proxy := testenv.NewProxy(t, "127.0.0.1:5672")
	conn := connect(t, cfg, "amqp://guest:guest@"+proxy.Addr()+"/")
	down := testenv.Downstream(t, cfg)

	pub := downstream.NewPublisher(conn, "relay-test")
	t.Cleanup(func() { _ = pub.Close() })
	relay := outbox.NewRelay(outbox.RelayConfig{BatchSize: 50, MinAge: time.Second}, st.Store, pub, testenv.Logger(t, cfg))

	// One row before the outage, so the publisher holds a channel on the
	// connection that is about to die.
	insertPending(t, st, cfg, "before", 1, 1)
	n, err := relay.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, ok := down.Get(5 * time.Second)
	require.True(t, ok, "the row sent before the outage arrived")

	const total = 20
	insertPending(t, st, cfg, "during", 100, total)
	proxy.Down()
	require.Eventually(t, func() bool {
		_, err := conn.Current()
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "the connection notices the outage")

	n, err = relay.RunOnce(t.Context())
	require.NoError(t, err, "an unreachable broker is not a relay error; the rows wait")
	require.Zero(t, n)
	rows := loadRows(t, st)
	require.Len(t, rows, total+1)
	for _, r := range rows[1:] {
		require.Equal(t, outbox.StatusPending, r.Status, "row %s", r.MessageID)
		require.Nil(t, r.SentAt, "row %s", r.MessageID)
		require.Equal(t, 1, r.Attempts, "the failed try is counted on row %s", r.MessageID)
		require.NotNil(t, r.LastError, "row %s", r.MessageID)
		require.Contains(t, *r.LastError, broker.ErrNotConnected.Error())
	}

	proxy.Up(t)
	require.Eventually(t, func() bool {
		_, err := conn.Current()
		return err == nil
	}, 15*time.Second, 20*time.Millisecond, "the connection comes back")

	n, err = relay.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, total, n)
	for _, r := range loadRows(t, st)[1:] {
		require.Equal(t, outbox.StatusSent, r.Status, "row %s", r.MessageID)
		require.Equal(t, 2, r.Attempts, "row %s: one failed try, one send", r.MessageID)
		require.NotNil(t, r.SentAt)
	}

	require.Eventually(t, func() bool { return down.Depth() >= total }, 10*time.Second, 20*time.Millisecond, "downstream got the messages")
	msgs := down.Drain(300 * time.Millisecond)
	require.Len(t, msgs, total)
	got := map[string]bool{}
	for _, m := range msgs {
		got[m.MessageId] = true
	}
	for i := range total {
		require.True(t, got[fmt.Sprintf("during-%d", i)], "during-%d delivered", i)
	}
}
