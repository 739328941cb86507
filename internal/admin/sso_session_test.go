package admin_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
	"callgate/internal/testenv"
)

// TestSSOSessionBinding: a single sign-on session lives while single
// sign-on is configured as it was at sign-in; another issuer, client,
// roles claim or group list, or single sign-on switched off, ends it (as
// rotating a token ends a token's sessions). A single sign-on session is
// never read as a token's, even when the person's name is a token's name,
// and an identity without a subject opens none.
func TestSSOSessionBinding(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	tokens, err := admin.ParseTokens("ops:ops-token-0123456789")
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	base := admin.SSOConfig{Issuer: "https://idp.example.com", ClientID: "callgate", ClientSecret: "client-secret-0123456789",
		RedirectURL: "https://cg.example.com/admin/oidc/callback", Operators: []string{"sre", "payments"}, Viewers: []string{"support"}}
	handler := func(sso *admin.SSOConfig) *admin.Handler {
		h := &admin.Handler{Tokens: tokens, Log: log, Service: &admin.Service{Store: st.Store, Log: log}}
		if sso != nil {
			h.SSO = admin.NewSSO(*sso, nil, log)
		}
		return h
	}
	h := handler(&base)
	// A viewer whose user name is the operator token's name.
	who := admin.Identity{Kind: admin.KindSSO, Actor: "ops", Role: admin.RoleViewer, Subject: "sub-7", Name: "ops"}
	id, err := h.StartSession(t.Context(), who, "id.token.raw")
	require.NoError(t, err)

	sess, err := h.CheckSession(t.Context(), id.String())
	require.NoError(t, err)
	require.Equal(t, who, sess.Identity, "still the viewer, not the token named ops")
	require.Equal(t, "id.token.raw", sess.IDToken)

	reordered := base
	reordered.Operators = []string{"payments", "sre"}
	_, err = handler(&reordered).CheckSession(t.Context(), id.String())
	require.NoError(t, err, "the same groups in another order are the same mapping")

	for name, change := range map[string]func(c *admin.SSOConfig){
		"another issuer":      func(c *admin.SSOConfig) { c.Issuer = "https://other.example.com" },
		"another client":      func(c *admin.SSOConfig) { c.ClientID = "other" },
		"another roles claim": func(c *admin.SSOConfig) { c.RolesClaim = "roles" },
		"an operator removed": func(c *admin.SSOConfig) { c.Operators = []string{"sre"} },
		"a viewer group more": func(c *admin.SSOConfig) { c.Viewers = []string{"support", "all"} },
	} {
		changed := base
		changed.Operators = append([]string(nil), base.Operators...)
		change(&changed)
		_, err := handler(&changed).CheckSession(t.Context(), id.String())
		require.ErrorIs(t, err, admin.ErrNoSession, name)
	}
	_, err = handler(nil).CheckSession(t.Context(), id.String())
	require.ErrorIs(t, err, admin.ErrNoSession, "single sign-on switched off")

	_, err = h.StartSession(t.Context(), admin.Identity{Kind: admin.KindSSO, Actor: "x", Role: admin.RoleOperator}, "")
	require.Error(t, err, "no subject, no session")
}

// TestLoweringMaxSessionShortensOpenSessions: a single sign-on session
// ends at the lesser of its stored expiry and its start plus the
// max_session configured now; raising max_session does not lengthen it.
func TestLoweringMaxSessionShortensOpenSessions(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	log := slog.New(slog.DiscardHandler)
	base := admin.SSOConfig{Issuer: "https://idp.example.com", ClientID: "callgate", ClientSecret: "client-secret-0123456789",
		RedirectURL: "https://cg.example.com/admin/oidc/callback", Operators: []string{"sre"}, MaxSession: 8 * time.Hour}
	handler := func(max time.Duration) *admin.Handler {
		c := base
		c.MaxSession = max
		return &admin.Handler{Log: log, Service: &admin.Service{Store: st.Store, Log: log}, SSO: admin.NewSSO(c, nil, log)}
	}
	id, err := handler(8*time.Hour).StartSession(t.Context(),
		admin.Identity{Kind: admin.KindSSO, Actor: "o@example.com", Role: admin.RoleOperator, Subject: "sub-1"}, "")
	require.NoError(t, err)
	// Opened two hours ago, with eight to live.
	_, err = st.SQL.Exec(`UPDATE admin_session SET created_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR,
		expires_at = UTC_TIMESTAMP(6) + INTERVAL 6 HOUR`)
	require.NoError(t, err)
	_, err = handler(3*time.Hour).CheckSession(t.Context(), id.String())
	require.NoError(t, err, "max_session 3h: an hour left")
	_, err = handler(24*time.Hour).CheckSession(t.Context(), id.String())
	require.NoError(t, err)
	_, err = st.SQL.Exec(`UPDATE admin_session SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND`)
	require.NoError(t, err)
	_, err = handler(24*time.Hour).CheckSession(t.Context(), id.String())
	require.ErrorIs(t, err, admin.ErrNoSession, "a longer max_session does not lengthen the stored expiry")

	id, err = handler(8*time.Hour).StartSession(t.Context(),
		admin.Identity{Kind: admin.KindSSO, Actor: "o@example.com", Role: admin.RoleOperator, Subject: "sub-1"}, "")
	require.NoError(t, err)
	_, err = st.SQL.Exec(`UPDATE admin_session SET created_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR`)
	require.NoError(t, err)
	_, err = handler(time.Hour).CheckSession(t.Context(), id.String())
	require.ErrorIs(t, err, admin.ErrNoSession, "max_session lowered to 1h ends a session opened 2h ago")
}
