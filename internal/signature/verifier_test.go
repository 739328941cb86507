package signature_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
)

// Shared fixtures for the scheme tests. Keys are arbitrary; signatures are
// computed in the tests with crypto/hmac directly, independently of the
// package's own Sign* helpers.
var (
	testNow = time.Unix(1_700_000_000, 0)
	keyA    = []byte("0123456789abcdef0123456789abcdef")
	keyB    = []byte("fedcba9876543210fedcba9876543210")
)

// rawMAC is HMAC-SHA256(key, parts...) computed independently of the package.
func rawMAC(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func headerOf(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// sentinels are the only errors Verify may return (wrapped).
var sentinels = []error{signature.ErrMissing, signature.ErrMalformed, signature.ErrMismatch, signature.ErrExpired}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func mustNew(t testing.TB, cfg signature.Config) signature.Verifier {
	t.Helper()
	v, err := signature.New(cfg)
	require.NoError(t, err)
	return v
}

func TestSentinelTexts(t *testing.T) {
	t.Parallel()
	require.Equal(t, "missing signature header", signature.ErrMissing.Error())
	require.Equal(t, "malformed signature header", signature.ErrMalformed.Error())
	require.Equal(t, "no signature matched", signature.ErrMismatch.Error())
	require.Equal(t, "timestamp outside the tolerance window", signature.ErrExpired.Error())
}

func TestNewValidation(t *testing.T) {
	t.Parallel()
	whsecA := "whsec_" + base64.StdEncoding.EncodeToString(keyA)

	tests := []struct {
		name string
		cfg  signature.Config
		want []string // each must appear in the error; nil means valid
	}{
		{name: "standard-webhooks ok", cfg: signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{whsecA}}},
		{name: "standard-webhooks bare base64 ok", cfg: signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{base64.StdEncoding.EncodeToString(keyB)}}},
		{name: "hmac ok", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}, Header: "X-Hub-Signature-256", Prefix: "sha256=", Encoding: "hex"}},
		{name: "hmac base64 ok", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}, Encoding: "base64"}},
		{name: "stripe ok", cfg: signature.Config{Scheme: signature.SchemeStripe, Secrets: []string{"whsec_x", "whsec_y"}, Tolerance: time.Minute}},
		{name: "none ok", cfg: signature.Config{Scheme: signature.SchemeNone, AllowUnsigned: true}},

		{name: "unknown scheme", cfg: signature.Config{Scheme: "foo", Secrets: []string{"s"}},
			want: []string{`scheme: unknown scheme "foo" (want one of standard-webhooks, hmac-sha256, stripe, none)`}},
		{name: "empty scheme", cfg: signature.Config{Secrets: []string{"s"}},
			want: []string{"scheme: is required (want one of standard-webhooks, hmac-sha256, stripe, none)"}},
		{name: "no secrets", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256},
			want: []string{"secrets: at least one secret is required"}},
		{name: "empty secret (unset env var)", cfg: signature.Config{Scheme: signature.SchemeStripe, Secrets: []string{""}},
			want: []string{"secrets[0]: secret is empty"}},
		{name: "empty rotated secret", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"ok", ""}},
			want: []string{"secrets[1]: secret is empty"}},
		{name: "secret with trailing newline", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s\n"}},
			want: []string{"secrets[0]: secret has leading or trailing whitespace"}},
		{name: "bad whsec", cfg: signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{whsecA, "whsec_not*base64"}},
			want: []string{"secrets[1]: standard-webhooks secret must look like whsec_<base64>"}},
		{name: "whsec with empty key", cfg: signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{"whsec_"}},
			want: []string{"secrets[0]: standard-webhooks secret must look like whsec_<base64>"}},
		{name: "bad encoding", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}, Encoding: "base32"},
			want: []string{`encoding: want hex or base64, got "base32"`}},
		{name: "none without allow_unsigned", cfg: signature.Config{Scheme: signature.SchemeNone},
			want: []string{"allow_unsigned: scheme none needs allow_unsigned: true"}},
		{name: "allow_unsigned on a signed scheme", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}, AllowUnsigned: true},
			want: []string{"allow_unsigned: only applies to scheme none"}},
		{name: "none with secrets", cfg: signature.Config{Scheme: signature.SchemeNone, AllowUnsigned: true, Secrets: []string{"s"}},
			want: []string{"secrets: scheme none takes no secrets"}},
		{name: "negative tolerance", cfg: signature.Config{Scheme: signature.SchemeStripe, Secrets: []string{"s"}, Tolerance: -time.Second},
			want: []string{"tolerance: must not be negative"}},
		{name: "tolerance on hmac", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}, Tolerance: time.Minute},
			want: []string{"tolerance: does not apply to scheme hmac-sha256"}},
		{name: "header on standard-webhooks", cfg: signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{whsecA}, Header: "X-Sig"},
			want: []string{"header: does not apply to scheme standard-webhooks"}},
		{name: "encoding and prefix on stripe", cfg: signature.Config{Scheme: signature.SchemeStripe, Secrets: []string{"s"}, Encoding: "hex", Prefix: "v1="},
			want: []string{"encoding: does not apply to scheme stripe", "prefix: does not apply to scheme stripe"}},
		{name: "invalid header name", cfg: signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}, Header: "X Sig:"},
			want: []string{`header: "X Sig:" is not a valid HTTP header name`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := signature.New(tt.cfg)
			if tt.want == nil {
				require.NoError(t, err)
				require.NotNil(t, v)
				return
			}
			require.Error(t, err)
			require.Nil(t, v)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestNewReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	_, err := signature.New(signature.Config{
		Scheme:    signature.SchemeStandardWebhooks,
		Secrets:   []string{"whsec_!!!", "", "whsec_" + base64.StdEncoding.EncodeToString(keyA)},
		Encoding:  "hex",
		Tolerance: -time.Minute,
	})
	require.Error(t, err)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "want an errors.Join error, got %T", err)
	require.Len(t, joined.Unwrap(), 4, err.Error())
	msg := err.Error()
	for _, w := range []string{
		"encoding: does not apply to scheme standard-webhooks",
		"tolerance: must not be negative",
		"secrets[0]: standard-webhooks secret must look like whsec_<base64>",
		"secrets[1]: secret is empty",
	} {
		require.Contains(t, msg, w)
	}
	// The bad secret itself is never echoed back.
	require.NotContains(t, msg, "whsec_!!!")

	_, err = signature.New(signature.Config{Scheme: "foo", Encoding: "rot13"})
	require.Error(t, err)
	require.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 3, err.Error())
	require.Contains(t, err.Error(), `scheme: unknown scheme "foo"`)
	require.Contains(t, err.Error(), "secrets: at least one secret is required")
	require.Contains(t, err.Error(), `encoding: want hex or base64, got "rot13"`)
}

func TestHeadersAreCanonicalAndCopied(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  signature.Config
		want []string
	}{
		{signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString(keyA)}},
			[]string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}},
		{signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}}, []string{"X-Signature"}},
		{signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}, Header: "x-hub-signature-256"}, []string{"X-Hub-Signature-256"}},
		{signature.Config{Scheme: signature.SchemeStripe, Secrets: []string{"s"}}, []string{"Stripe-Signature"}},
		{signature.Config{Scheme: signature.SchemeNone, AllowUnsigned: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.cfg.Scheme, func(t *testing.T) {
			t.Parallel()
			v := mustNew(t, tt.cfg)
			got := v.Headers()
			require.Equal(t, tt.want, got)
			for _, name := range got {
				require.Equal(t, http.CanonicalHeaderKey(name), name)
			}
			if len(got) > 0 {
				got[0] = "mutated"
				require.Equal(t, tt.want, v.Headers(), "Headers must return a copy")
			}
		})
	}
}

// assertSafeError checks an error never leaks secret material.
func assertSafeError(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" {
			require.False(t, strings.Contains(err.Error(), s), "error %q leaks %q", err, s)
		}
	}
}
