package signature_test

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
)

// Stripe keys the HMAC with the whole secret string, whsec_ prefix included
// (it is not base64-decoded).
const (
	stripeSecretA = "whsec_test_secretAAAAAAAAAAAAAAAA"
	stripeSecretB = "whsec_test_secretBBBBBBBBBBBBBBBB"
)

// stripeV1 computes hex(HMAC(secret, "{t}.{body}")) independently of the package.
func stripeV1(secret, t, body string) string {
	return hex.EncodeToString(rawMAC([]byte(secret), t, ".", body))
}

func TestStripeVerify(t *testing.T) {
	t.Parallel()
	const body = `{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`
	ts := strconv.FormatInt(testNow.Unix(), 10)
	at := func(d time.Duration) string { return strconv.FormatInt(testNow.Add(d).Unix(), 10) }
	v1A := stripeV1(stripeSecretA, ts, body)
	v1B := stripeV1(stripeSecretB, ts, body)
	hdr := func(v string) http.Header { return headerOf("Stripe-Signature", v) }

	tests := []struct {
		name    string
		secrets []string
		header  string // Config.Header
		tol     time.Duration
		h       http.Header
		body    string
		wantErr error
		wantMsg string
	}{
		{name: "valid", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",v1=" + v1A)},
		{name: "valid with v0 and spaces", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ", v1=" + v1A + ", v0=" + strings.Repeat("0", 64))},
		{name: "uppercase hex", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",v1=" + strings.ToUpper(v1A))},
		{name: "wrong secret", secrets: []string{stripeSecretB}, h: hdr("t=" + ts + ",v1=" + v1A),
			wantErr: signature.ErrMismatch, wantMsg: "Stripe-Signature: no signature matched"},
		{name: "whsec secret is not base64-decoded", secrets: []string{stripeSecretA},
			h:       hdr("t=" + ts + ",v1=" + hex.EncodeToString(rawMAC([]byte("test_secretAAAAAAAAAAAAAAAA"), ts, ".", body))),
			wantErr: signature.ErrMismatch},
		{name: "rotation: second of two secrets matches", secrets: []string{stripeSecretB, stripeSecretA}, h: hdr("t=" + ts + ",v1=" + v1A)},
		{name: "multiple v1, only the second matches", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",v1=" + v1B + ",v1=" + v1A)},
		{name: "multiple v1 first malformed second matches", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",v1=xyz,v1=" + v1A)},
		{name: "t after v1", secrets: []string{stripeSecretA}, h: hdr("v1=" + v1A + ",t=" + ts)},
		{name: "custom header", secrets: []string{stripeSecretA}, header: "x-my-signature", h: headerOf("X-My-Signature", "t="+ts+",v1="+v1A)},
		{name: "missing header", secrets: []string{stripeSecretA}, h: http.Header{},
			wantErr: signature.ErrMissing, wantMsg: "Stripe-Signature: missing signature header"},
		{name: "custom header missing", secrets: []string{stripeSecretA}, header: "X-My-Signature", h: hdr("t=" + ts + ",v1=" + v1A),
			wantErr: signature.ErrMissing, wantMsg: "X-My-Signature: missing signature header"},
		{name: "malformed: bare word", secrets: []string{stripeSecretA}, h: hdr("garbage"),
			wantErr: signature.ErrMalformed, wantMsg: "not key=value"},
		{name: "malformed: no t", secrets: []string{stripeSecretA}, h: hdr("v1=" + v1A),
			wantErr: signature.ErrMalformed, wantMsg: "has no t= timestamp"},
		{name: "malformed: two t", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",t=" + ts + ",v1=" + v1A),
			wantErr: signature.ErrMalformed},
		{name: "malformed: non-numeric t", secrets: []string{stripeSecretA}, h: hdr("t=now,v1=" + v1A),
			wantErr: signature.ErrMalformed, wantMsg: "t= is not a unix timestamp"},
		{name: "malformed: empty t", secrets: []string{stripeSecretA}, h: hdr("t=,v1=" + v1A),
			wantErr: signature.ErrMalformed},
		{name: "malformed: negative t", secrets: []string{stripeSecretA}, h: hdr("t=-" + ts + ",v1=" + v1A),
			wantErr: signature.ErrMalformed},
		{name: "malformed: v1 not hex", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",v1=" + strings.Repeat("g", 64)),
			wantErr: signature.ErrMalformed, wantMsg: "v1 entries are not hex"},
		{name: "malformed: v1 too short", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",v1=" + v1A[:10]),
			wantErr: signature.ErrMalformed},
		{name: "no v1, only v0", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",v0=" + v1A),
			wantErr: signature.ErrMismatch, wantMsg: "has no v1 signature"},
		{name: "tampered body", secrets: []string{stripeSecretA}, h: hdr("t=" + ts + ",v1=" + v1A), body: body + "\n",
			wantErr: signature.ErrMismatch},
		{name: "tampered t", secrets: []string{stripeSecretA}, h: hdr("t=" + at(time.Second) + ",v1=" + v1A),
			wantErr: signature.ErrMismatch},
		{name: "expired: too old", secrets: []string{stripeSecretA},
			h:       hdr("t=" + at(-6*time.Minute) + ",v1=" + stripeV1(stripeSecretA, at(-6*time.Minute), body)),
			wantErr: signature.ErrExpired, wantMsg: "too old"},
		{name: "expired: future", secrets: []string{stripeSecretA},
			h:       hdr("t=" + at(6*time.Minute) + ",v1=" + stripeV1(stripeSecretA, at(6*time.Minute), body)),
			wantErr: signature.ErrExpired, wantMsg: "too far in the future"},
		{name: "custom tolerance accepts 6m old", secrets: []string{stripeSecretA}, tol: 10 * time.Minute,
			h: hdr("t=" + at(-6*time.Minute) + ",v1=" + stripeV1(stripeSecretA, at(-6*time.Minute), body))},
		{name: "custom tolerance rejects 2m old", secrets: []string{stripeSecretA}, tol: time.Minute,
			h:       hdr("t=" + at(-2*time.Minute) + ",v1=" + stripeV1(stripeSecretA, at(-2*time.Minute), body)),
			wantErr: signature.ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := mustNew(t, signature.Config{Scheme: signature.SchemeStripe, Secrets: tt.secrets, Header: tt.header, Tolerance: tt.tol})
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
				assertSafeError(t, err, append(tt.secrets, v1A, v1B)...)
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestSignStripe(t *testing.T) {
	t.Parallel()
	ts := strconv.FormatInt(testNow.Unix(), 10)
	got := signature.SignStripe(stripeSecretA, testNow, []byte("{}"))
	require.Equal(t, "t="+ts+",v1="+stripeV1(stripeSecretA, ts, "{}"), got)

	v := mustNew(t, signature.Config{Scheme: signature.SchemeStripe, Secrets: []string{stripeSecretA}})
	_, err := v.Verify(headerOf("Stripe-Signature", got), []byte("{}"), testNow.Add(4*time.Minute))
	require.NoError(t, err)
}

func FuzzStripeHeader(f *testing.F) {
	ts := strconv.FormatInt(testNow.Unix(), 10)
	good := "t=" + ts + ",v1=" + stripeV1(stripeSecretA, ts, "body")
	f.Add(good, []byte("body"))
	f.Add(good+",v0="+strings.Repeat("0", 64), []byte("body"))
	f.Add("t="+ts+",v1="+stripeV1(stripeSecretB, ts, "body")+",v1="+stripeV1(stripeSecretA, ts, "body"), []byte("body"))
	f.Add("t="+ts, []byte("body"))
	f.Add("v1="+strings.Repeat("a", 64), []byte("body"))
	f.Add("t=,v1=", []byte{})
	f.Add(",,,=,t==,v1==", []byte(nil))
	f.Add("t=99999999999999999999,v1=zz", []byte("x"))
	f.Add("t="+ts+",t="+ts, []byte("x"))
	f.Add("garbage", []byte("\x00"))

	v := mustNew(f, signature.Config{Scheme: signature.SchemeStripe, Secrets: []string{stripeSecretB, stripeSecretA}})
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		h := http.Header{}
		h.Set("Stripe-Signature", header)
		res, err := v.Verify(h, body, testNow)
		require.Empty(t, res.EventID)
		if err != nil {
			require.True(t, isSentinel(err), "unexpected error %v", err)
		}

		// Property: a correctly signed header verifies, and not for another body.
		h.Set("Stripe-Signature", signature.SignStripe(stripeSecretA, testNow, body))
		_, err = v.Verify(h, body, testNow)
		require.NoError(t, err)
		_, err = v.Verify(h, append(append([]byte(nil), body...), 0), testNow)
		require.ErrorIs(t, err, signature.ErrMismatch)
	})
}

func BenchmarkStripeVerify(b *testing.B) {
	body := []byte(strings.Repeat(`{"k":"v"},`, 102)) // ~1 KB
	v := mustNew(b, signature.Config{Scheme: signature.SchemeStripe, Secrets: []string{stripeSecretA}})
	h := headerOf("Stripe-Signature", signature.SignStripe(stripeSecretA, testNow, body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(h, body, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
