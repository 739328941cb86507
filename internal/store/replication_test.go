package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestReplicaReadingFailedIsUnknown: a semi-sync reading that fails is
// "unknown", not acknowledging, so CallgateReplicaNotAcknowledging can
// fire while the primary is unreachable; it used to keep the last good
// reading.
func TestReplicaReadingFailedIsUnknown(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.MySQL.Durability = store.DurabilityReplica })
	st, err := store.Open(cfg.MySQL)
	require.NoError(t, err)
	defer st.Close()
	store.SemiSyncReading(st, true, 2)
	on, clients, known := st.ReplicaAcknowledging()
	require.True(t, on && known)
	require.EqualValues(t, 2, clients)

	store.CloseSQL(st)
	require.Error(t, st.PingReplica(t.Context()))
	on, clients, known = st.ReplicaAcknowledging()
	require.False(t, on, "a failed reading is not acknowledging")
	require.False(t, known, "a failed reading is unknown")
	require.Zero(t, clients, "and shows no replica connected")
}

// TestPingReplicaWantsAConnectedReplica: on this server semi-sync is not
// on and no replica is connected: not ready, saying how many are.
func TestPingReplicaWantsAConnectedReplica(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.MySQL.Durability = store.DurabilityReplica })
	st, err := store.Open(cfg.MySQL)
	require.NoError(t, err)
	defer st.Close()
	err = st.PingReplica(t.Context())
	require.ErrorContains(t, err, "0 semi-sync replicas connected")
	on, clients, known := st.ReplicaAcknowledging()
	require.False(t, on)
	require.Zero(t, clients)
	require.True(t, known)
}
