package admin_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestSSOFlowKeyFromTheDatabase: the flow cookie's key is the
// deployment's, made once in deployment_keys: two processes (two stores,
// each its own connections) asking at once on an empty table get the same
// random 32-byte key, so their SSOs accept each other's flow cookies,
// even configured with another client secret; an SSO of another
// deployment (another database) refuses them, and so do all of them a
// cookie MACed with the key the client secret used to give.
func TestSSOFlowKeyFromTheDatabase(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	one, two := testenv.Store(t, cfg), testenv.Store(t, cfg)
	log := slog.New(slog.DiscardHandler)
	base := admin.SSOConfig{Issuer: "https://idp.example.com", ClientID: "callgate", ClientSecret: "client-secret-0123456789",
		RedirectURL: "https://cg.example.com/admin/oidc/callback", Operators: []string{"ops"}}
	source := func(st *testenv.TestStore) admin.FlowKeySource {
		return func(ctx context.Context) ([]byte, error) { return st.DeploymentKey(ctx, store.DeploymentKeySSOFlow) }
	}

	keys := make([][]byte, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		st := one
		if i%2 == 1 {
			st = two
		}
		wg.Go(func() { keys[i], errs[i] = st.DeploymentKey(t.Context(), store.DeploymentKeySSOFlow) })
	}
	wg.Wait()
	for i, k := range keys {
		require.NoError(t, errs[i])
		require.Len(t, k, store.DeploymentKeyBytes)
		require.Equal(t, keys[0], k, "one key for every process")
	}
	var rows int
	require.NoError(t, one.SQL.QueryRow(`SELECT COUNT(*) FROM deployment_keys`).Scan(&rows))
	require.Equal(t, 1, rows)

	a := admin.NewSSO(base, source(one), log)
	rotated := base
	rotated.ClientSecret = "another-secret-0123456789"
	b := admin.NewSSO(rotated, source(two), log)
	require.NoError(t, a.LoadFlowKey(t.Context()))
	require.NoError(t, b.LoadFlowKey(t.Context()))
	fromA, fromB := admin.MintFlow(a, "st-a", "192.0.2.1"), admin.MintFlow(b, "st-b", "192.0.2.1")
	require.True(t, admin.FlowHolds(b, fromA), "a cookie of one process holds at the other")
	require.True(t, admin.FlowHolds(a, fromB), "whatever the client secret")

	elsewhere := testenv.Store(t, testenv.Config(t))
	c := admin.NewSSO(base, source(elsewhere), log)
	require.NoError(t, c.LoadFlowKey(t.Context()))
	require.False(t, admin.FlowHolds(c, fromA), "another deployment's key")
	key, err := elsewhere.DeploymentKey(t.Context(), store.DeploymentKeySSOFlow)
	require.NoError(t, err)
	require.NotEqual(t, keys[0], key, "random per deployment")

	// The payload of a's cookie MACed as NewSSO used to key it, from the
	// client secret: what anyone holding a cookie could test guesses of
	// the secret against.
	m := hmac.New(sha256.New, []byte(base.ClientSecret))
	m.Write([]byte("callgate-oidc-flow\x00" + base.Issuer + "\x00" + base.ClientID))
	payload, _, _ := strings.Cut(fromA, ".")
	mac := hmac.New(sha256.New, m.Sum(nil))
	mac.Write([]byte(payload))
	secretMACed := payload + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	require.NotEqual(t, fromA, secretMACed)
	for _, s := range []*admin.SSO{a, b, c} {
		require.False(t, admin.FlowHolds(s, secretMACed), "a cookie MACed with the client secret's key")
	}

	_, err = one.DeploymentKey(t.Context(), strings.Repeat("k", 65))
	require.ErrorContains(t, err, "want 1 to 64 characters", "never a truncated name")
}
