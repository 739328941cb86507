package gateway_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/gateway"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestGatewayRefusesReplicaDurabilityWithoutSemiSync: with
// mysql.durability: replica a gateway whose primary does not replicate
// semi-synchronously would answer 200 for callbacks only it holds; it
// refuses to start instead, naming the setting. (The HA scenarios run the
// other side, on a replicated primary: make test-ha.)
func TestGatewayRefusesReplicaDurabilityWithoutSemiSync(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.MySQL.Durability = store.DurabilityReplica })
	db, err := sql.Open("mysql", cfg.MySQL.DSN)
	require.NoError(t, err)
	defer db.Close()
	var name, enabled string
	require.NoError(t, db.QueryRow(`SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_master_enabled'`).Scan(&name, &enabled))
	if enabled == "ON" {
		t.Skip("the test server replicates semi-synchronously")
	}
	err = gateway.Run(t.Context(), cfg, testenv.Logger(t, cfg), nil)
	require.ErrorIs(t, err, store.ErrReplicationSettings)
	require.ErrorContains(t, err, "rpl_semi_sync_master_enabled is OFF, want ON")
}
