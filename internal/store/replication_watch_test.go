package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestReplicaWatcherDeadlineIsUnknown: with mysql.durability: replica,
// the gateway's watcher reads the primary's semi-sync state every second
// under a deadline of its own. A primary that hangs (here the proxy in
// front of it stops passing bytes) must turn the reading unknown and not
// acknowledging (the replica metric 0), where a caller that goes away
// (a request whose client left, the process stopping) leaves the last
// reading as it was. The watcher's deadline used to count as a caller
// going away, so the metric stayed 1 while the primary hung.
func TestReplicaWatcherDeadlineIsUnknown(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.MySQL.Durability = store.DurabilityReplica })
	dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
	require.NoError(t, err)
	proxy := testenv.NewProxy(t, dsn.Addr)
	dsn.Addr = proxy.Addr()
	cfg.MySQL.DSN = dsn.FormatDSN()
	st, err := store.Open(cfg.MySQL)
	require.NoError(t, err)
	defer st.Close()

	// A good reading through the proxy: this server does not replicate,
	// so it is known and says no replica acknowledges...
	require.ErrorContains(t, st.PingReplicaWithin(t.Context(), 5*time.Second), "0 semi-sync replicas connected")
	_, _, known := st.ReplicaAcknowledging()
	require.True(t, known, "a reading the primary answered is known")
	// ...so the acknowledging state a replicated primary would give is
	// set by hand: what must change, or must not, is that.
	store.SemiSyncReading(st, true, 2)
	acknowledging := func(t *testing.T) {
		t.Helper()
		on, clients, known := st.ReplicaAcknowledging()
		require.True(t, on && known, "the last reading is kept")
		require.EqualValues(t, 2, clients)
	}

	proxy.Hang(t)

	// Callers that went away while the primary hung change nothing: a
	// request cancelled mid-reading (PingReplica, as /readyz and the
	// admin API read it), and the watcher itself when its process stops
	// before its own deadline.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	require.Error(t, st.PingReplica(ctx))
	acknowledging(t)
	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	require.Error(t, st.PingReplicaWithin(ctx, 10*time.Second))
	require.Less(t, time.Since(start), 5*time.Second, "the cancellation ended the reading, not the deadline")
	acknowledging(t)

	// The watcher's own deadline passing is the primary not answering.
	err = st.PingReplicaWithin(t.Context(), 300*time.Millisecond)
	require.Error(t, err)
	on, clients, known := st.ReplicaAcknowledging()
	require.False(t, known, "a reading the primary did not answer is unknown")
	require.False(t, on, "and not acknowledging")
	require.Zero(t, clients)
	require.ErrorContains(t, err, "the primary did not answer the semi-sync reading in time", "the watcher logs why")
}
