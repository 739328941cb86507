package signature_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
)

// GitHub's published example, from "Validating webhook deliveries"
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries):
// secret "It's a Secret to Everybody", payload "Hello, World!".
const (
	githubSecret    = "It's a Secret to Everybody"
	githubPayload   = "Hello, World!"
	githubSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func TestHMACGitHubPublishedVector(t *testing.T) {
	t.Parallel()
	v := mustNew(t, signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{githubSecret}, Header: "X-Hub-Signature-256", Prefix: "sha256="})
	res, err := v.Verify(headerOf("X-Hub-Signature-256", githubSignature), []byte(githubPayload), testNow)
	require.NoError(t, err)
	require.Empty(t, res.EventID)
	require.Equal(t, githubSignature, signature.SignHMAC(githubSecret, []byte(githubPayload), "hex", "sha256="))

	_, err = v.Verify(headerOf("X-Hub-Signature-256", githubSignature), []byte(githubPayload+"\n"), testNow)
	require.ErrorIs(t, err, signature.ErrMismatch)
}

func TestHMACVerify(t *testing.T) {
	t.Parallel()
	const body = `{"action":"opened","number":1}`
	secretA, secretB := string(keyA), string(keyB)
	macA := rawMAC(keyA, body)
	macB := rawMAC(keyB, body)
	hexA, hexB := hex.EncodeToString(macA), hex.EncodeToString(macB)
	b64A := base64.StdEncoding.EncodeToString(macA)

	github := func(secrets ...string) signature.Config {
		return signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: secrets, Header: "X-Hub-Signature-256", Prefix: "sha256="}
	}
	shopify := func(secrets ...string) signature.Config {
		return signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: secrets, Header: "X-Shopify-Hmac-Sha256", Encoding: "base64"}
	}
	plain := func(secrets ...string) signature.Config {
		return signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: secrets}
	}

	tests := []struct {
		name    string
		cfg     signature.Config
		h       http.Header
		body    string
		wantErr error
		wantMsg string
	}{
		// GitHub style.
		{name: "github valid", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", "sha256="+hexA)},
		{name: "github lowercase header name on the wire", cfg: github(secretA), h: headerOf("x-hub-signature-256", "sha256="+hexA)},
		{name: "github uppercase hex", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", "sha256="+strings.ToUpper(hexA))},
		{name: "github prefix case-insensitive", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", "SHA256="+hexA)},
		{name: "github wrong secret", cfg: github(secretB), h: headerOf("X-Hub-Signature-256", "sha256="+hexA),
			wantErr: signature.ErrMismatch, wantMsg: "X-Hub-Signature-256: no signature matched"},
		{name: "github rotation: second secret matches", cfg: github(secretB, secretA), h: headerOf("X-Hub-Signature-256", "sha256="+hexA)},
		{name: "github rotation: first secret matches", cfg: github(secretB, secretA), h: headerOf("X-Hub-Signature-256", "sha256="+hexB)},
		{name: "github missing header", cfg: github(secretA), h: headerOf("X-Signature", "sha256="+hexA),
			wantErr: signature.ErrMissing, wantMsg: "X-Hub-Signature-256: missing signature header"},
		{name: "github missing prefix", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", hexA),
			wantErr: signature.ErrMalformed, wantMsg: `does not start with "sha256="`},
		{name: "github sha1 header value", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", "sha1=0123456789abcdef0123456789abcdef01234567"),
			wantErr: signature.ErrMalformed},
		{name: "github prefix only", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", "sha256="),
			wantErr: signature.ErrMalformed},
		{name: "github not hex", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", "sha256="+strings.Repeat("zz", 32)),
			wantErr: signature.ErrMalformed, wantMsg: "not a hex HMAC-SHA256"},
		{name: "github truncated hex", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", "sha256="+hexA[:62]),
			wantErr: signature.ErrMalformed},
		{name: "github tampered body", cfg: github(secretA), h: headerOf("X-Hub-Signature-256", "sha256="+hexA), body: body + " ",
			wantErr: signature.ErrMismatch},

		// Shopify style.
		{name: "shopify valid", cfg: shopify(secretA), h: headerOf("X-Shopify-Hmac-Sha256", b64A)},
		{name: "shopify url-safe unpadded also accepted", cfg: shopify(secretA),
			h: headerOf("X-Shopify-Hmac-Sha256", base64.RawURLEncoding.EncodeToString(macA))},
		{name: "shopify wrong secret", cfg: shopify(secretB), h: headerOf("X-Shopify-Hmac-Sha256", b64A), wantErr: signature.ErrMismatch},
		{name: "shopify rotation: second secret matches", cfg: shopify(secretB, secretA), h: headerOf("X-Shopify-Hmac-Sha256", b64A)},
		{name: "shopify missing header", cfg: shopify(secretA), h: http.Header{}, wantErr: signature.ErrMissing},
		{name: "shopify empty header", cfg: shopify(secretA), h: headerOf("X-Shopify-Hmac-Sha256", "  "), wantErr: signature.ErrMissing},
		{name: "shopify hex where base64 expected", cfg: shopify(secretA), h: headerOf("X-Shopify-Hmac-Sha256", hexA),
			wantErr: signature.ErrMalformed, wantMsg: "not a base64 HMAC-SHA256"},
		{name: "shopify not base64", cfg: shopify(secretA), h: headerOf("X-Shopify-Hmac-Sha256", strings.Repeat("!", 44)),
			wantErr: signature.ErrMalformed},
		{name: "shopify tampered body", cfg: shopify(secretA), h: headerOf("X-Shopify-Hmac-Sha256", b64A), body: "{}",
			wantErr: signature.ErrMismatch},

		// Default header, hex, no prefix.
		{name: "default X-Signature", cfg: plain(secretA), h: headerOf("X-Signature", hexA)},
		{name: "surrounding spaces are ignored", cfg: plain(secretA), h: headerOf("X-Signature", " "+hexA+" ")},
		{name: "base64 where hex expected", cfg: plain(secretA), h: headerOf("X-Signature", b64A), wantErr: signature.ErrMalformed},
		{name: "second secret, other signature", cfg: plain(secretA, secretB), h: headerOf("X-Signature", hexB)},
		{name: "mac of another body", cfg: plain(secretA), h: headerOf("X-Signature", hex.EncodeToString(rawMAC(keyA, "other"))),
			wantErr: signature.ErrMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := mustNew(t, tt.cfg)
			b := tt.body
			if b == "" {
				b = body
			}
			res, err := v.Verify(tt.h, []byte(b), testNow)
			require.Empty(t, res.EventID)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				if tt.wantMsg != "" {
					require.Contains(t, err.Error(), tt.wantMsg)
				}
				assertSafeError(t, err, append(tt.cfg.Secrets, hexA, hexB, b64A)...)
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestHMACIgnoresTime(t *testing.T) {
	t.Parallel()
	v := mustNew(t, signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{"s"}})
	h := headerOf("X-Signature", signature.SignHMAC("s", []byte("b"), "", ""))
	for _, now := range []time.Time{{}, testNow, testNow.AddDate(50, 0, 0)} {
		_, err := v.Verify(h, []byte("b"), now)
		require.NoError(t, err)
	}
}

func TestSignHMAC(t *testing.T) {
	t.Parallel()
	mac := rawMAC(keyA, "payload")
	require.Equal(t, hex.EncodeToString(mac), signature.SignHMAC(string(keyA), []byte("payload"), "hex", ""))
	require.Equal(t, hex.EncodeToString(mac), signature.SignHMAC(string(keyA), []byte("payload"), "", ""))
	require.Equal(t, "sha256="+hex.EncodeToString(mac), signature.SignHMAC(string(keyA), []byte("payload"), "hex", "sha256="))
	require.Equal(t, base64.StdEncoding.EncodeToString(mac), signature.SignHMAC(string(keyA), []byte("payload"), "base64", ""))
}

func FuzzHMACVerify(f *testing.F) {
	hexA := hex.EncodeToString(rawMAC(keyA, "body"))
	b64A := base64.StdEncoding.EncodeToString(rawMAC(keyA, "body"))
	f.Add("sha256="+hexA, []byte("body"), false)
	f.Add(hexA, []byte("body"), false)
	f.Add(b64A, []byte("body"), true)
	f.Add(base64.RawURLEncoding.EncodeToString(rawMAC(keyA, "body")), []byte("body"), true)
	f.Add(githubSignature, []byte(githubPayload), false)
	f.Add("sha256=", []byte{}, false)
	f.Add("", []byte(nil), true)
	f.Add(strings.Repeat("=", 44), []byte("x"), true)
	f.Add("sha256="+strings.Repeat("G", 64), []byte("x"), false)
	f.Add("\x00\xff==", []byte("\x00"), true)

	hexV := mustNew(f, signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{string(keyB), string(keyA)}, Header: "X-Hub-Signature-256", Prefix: "sha256="})
	b64V := mustNew(f, signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{string(keyB), string(keyA)}, Header: "X-Shopify-Hmac-Sha256", Encoding: "base64"})
	f.Fuzz(func(t *testing.T, value string, body []byte, useBase64 bool) {
		v, header, enc, prefix := hexV, "X-Hub-Signature-256", "hex", "sha256="
		if useBase64 {
			v, header, enc, prefix = b64V, "X-Shopify-Hmac-Sha256", "base64", ""
		}
		h := http.Header{}
		h.Set(header, value)
		if _, err := v.Verify(h, body, testNow); err != nil {
			require.True(t, isSentinel(err), "unexpected error %v", err)
		}

		// Property: the right signature verifies; one for another body does not.
		h.Set(header, signature.SignHMAC(string(keyA), body, enc, prefix))
		_, err := v.Verify(h, body, testNow)
		require.NoError(t, err)
		_, err = v.Verify(h, append(append([]byte(nil), body...), 0), testNow)
		require.ErrorIs(t, err, signature.ErrMismatch)
	})
}

func BenchmarkHMACVerify(b *testing.B) {
	body := []byte(strings.Repeat(`{"k":"v"},`, 102)) // ~1 KB
	v := mustNew(b, signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: []string{githubSecret}, Header: "X-Hub-Signature-256", Prefix: "sha256="})
	h := headerOf("X-Hub-Signature-256", "sha256="+hex.EncodeToString(rawMAC([]byte(githubSecret), string(body))))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(h, body, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
