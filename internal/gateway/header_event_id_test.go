package gateway_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/signature"
	"callgate/internal/source"
	"callgate/internal/testenv"
)

// githubSecret is GitHub's own example secret (validating webhook
// deliveries), whose published signature the test checks first.
const githubSecret = "It's a Secret to Everybody"

// TestPlatformOfAKnownShapeIsConfiguration: a platform that signs the raw
// body with an HMAC in a header and names its delivery in another,
// unsigned header (GitHub) needs no code: the hmac-sha256 scheme with a
// prefix, and the event id from a digest of the signed body
// (event_id.body_digest), since an id from X-GitHub-Delivery, which the
// signature does not cover, would let a captured delivery be re-sent as
// a new callback (config_test: such a source is refused at start).
func TestPlatformOfAKnownShapeIsConfiguration(t *testing.T) {
	require.Equal(t, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		signature.SignHMAC(githubSecret, []byte("Hello, World!"), "hex", "sha256="), "GitHub's published vector")

	b := setup(t, func(c *config.Config) {
		c.Sources = append(c.Sources, source.Config{
			Name: "github", Kind: "payment",
			Signature:   source.Signature{Scheme: "hmac-sha256", Header: "X-Hub-Signature-256", Prefix: "sha256=", Secrets: []string{githubSecret}},
			EventID:     source.EventID{BodyDigest: true},
			BusinessKey: "repository.full_name",
		}.WithDefaults())
	})
	body := []byte(`{"action":"completed","repository":{"full_name":"octo-org/octo-repo"}}`)
	delivery := func(id string) http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("X-GitHub-Event", "check_run")
		h.Set("X-Hub-Signature-256", signature.SignHMAC(githubSecret, body, "hex", "sha256="))
		if id != "" {
			h.Set("X-GitHub-Delivery", id)
		}
		return h
	}
	a := testenv.Post(t, b.gw.URL, "github", body, delivery("72d3162e-cc78-11e3-81ab-4c9367dc0958"))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	row := b.row(t, a.LogID)
	require.Equal(t, callback.BodyDigest(body), row.EventID, "the signed body's digest is the event id")
	require.Equal(t, "octo-org/octo-repo", row.BusinessKey)

	for _, id := range []string{"72d3162e-cc78-11e3-81ab-4c9367dc0958", "00000000-0000-0000-0000-000000000000", ""} {
		again := testenv.Post(t, b.gw.URL, "github", body, delivery(id))
		require.Equal(t, http.StatusOK, again.Status, string(again.Body))
		require.True(t, again.Duplicate, "a redelivery, under any X-GitHub-Delivery or none, is a duplicate")
		require.Equal(t, a.LogID, again.LogID)
	}
	require.Equal(t, 1, b.count(t))
}
