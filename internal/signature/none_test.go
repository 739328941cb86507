package signature_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
)

func TestNoneAcceptsEverythingWhenAllowed(t *testing.T) {
	t.Parallel()
	v := mustNew(t, signature.Config{Scheme: signature.SchemeNone, AllowUnsigned: true})
	tests := []struct {
		name string
		h    http.Header
		body []byte
	}{
		{name: "nothing", h: nil, body: nil},
		{name: "bogus signature headers", h: headerOf("X-Signature", "nope", "Webhook-Signature", "v1,xx"), body: []byte("{}")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := v.Verify(tt.h, tt.body, time.Time{})
			require.NoError(t, err)
			require.Empty(t, res.EventID)
		})
	}
	require.Empty(t, v.Headers())
}

func TestNoneRefusedWithoutAllowUnsigned(t *testing.T) {
	t.Parallel()
	v, err := signature.New(signature.Config{Scheme: signature.SchemeNone})
	require.Nil(t, v)
	require.EqualError(t, err, "allow_unsigned: scheme none needs allow_unsigned: true")
}
