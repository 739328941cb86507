package admin_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
)

// TestParseTokensRefusesAnEmailName: a token's name is its audit actor,
// and a single sign-on user's is their verified e-mail: a token named like
// an address would share a person's actor, so it stops the start, naming
// the token and why (never its secret). Names merely near the single
// sign-on forms stay names.
func TestParseTokensRefusesAnEmailName(t *testing.T) {
	t.Parallel()
	const secret = "alice-secret-0123456789"
	for _, spec := range []string{
		"alice@example.com:" + secret,
		"alice@example.com:" + secret + ":viewer",
		"ops:ops-token-0123456789,Alice@Example.COM:" + secret,
		"@:" + secret,
	} {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			tokens, err := admin.ParseTokens(spec)
			require.Error(t, err, "parsed as %s", tokens.Summary())
			require.Contains(t, err.Error(), `a token's name cannot hold "@"`)
			require.Contains(t, err.Error(), "e-mail")
			require.NotContains(t, err.Error(), secret)
		})
	}
	tokens, err := admin.ParseTokens("alice.ops:" + secret + ",sso:" + secret + "x,SSO-bot:" + secret + "y")
	require.NoError(t, err)
	require.Equal(t, "alice.ops=operator,sso=operator,SSO-bot=operator", tokens.Summary())
}
