package signature_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
)

// Test vectors published by the Standard Webhooks project
// (github.com/standard-webhooks/standard-webhooks): the sign test in
// libraries/go/webhook_test.go (TestWebhookSign; the same vector is used by
// the JavaScript, Python and other reference libraries), and the negative
// signatures used by those suites (libraries/go/webhook_test.go,
// libraries/python/tests/test_webhooks.py,
// libraries/javascript/src/webhook.test.ts). The header layout (space
// separated entries, v1a entries for ed25519) follows spec/standard-webhooks.md.
const (
	swVectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swVectorBare      = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // same key without the prefix
	swVectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swVectorTimestamp = "1614265330"
	swVectorPayload   = `{"test": 2432232314}`
	swVectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	// Wrong signatures from the reference suites.
	swVectorInvalid  = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	swVectorOneOff   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="
	swVectorGarbage  = "v1,dawfeoifkpqwoekfpqoekf"
	swVectorV1aEntry = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
)

var swVectorTime = time.Unix(1614265330, 0)

func TestStandardWebhooksSpecVectors(t *testing.T) {
	t.Parallel()

	t.Run("sign", func(t *testing.T) {
		t.Parallel()
		for _, secret := range []string{swVectorSecret, swVectorBare} {
			got, err := signature.SignStandardWebhooks(secret, swVectorID, swVectorTime, []byte(swVectorPayload))
			require.NoError(t, err)
			require.Equal(t, swVectorSignature, got)
		}
	})

	tests := []struct {
		name    string
		secret  string
		ts      string
		sig     string
		now     time.Time
		wantErr error
	}{
		{name: "vector verifies", secret: swVectorSecret, sig: swVectorSignature},
		{name: "vector verifies with bare base64 secret", secret: swVectorBare, sig: swVectorSignature},
		{name: "multi signature with v2 and bad v1 around the good one", secret: swVectorSecret,
			sig: strings.Join([]string{swVectorInvalid, "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", swVectorSignature, swVectorInvalid}, " ")},
		{name: "good v1 next to a v1a entry", secret: swVectorSecret, sig: swVectorV1aEntry + " " + swVectorSignature},
		{name: "invalid signature", secret: swVectorSecret, sig: swVectorInvalid, wantErr: signature.ErrMismatch},
		{name: "one character off", secret: swVectorSecret, sig: swVectorOneOff, wantErr: signature.ErrMismatch},
		{name: "partial signature v1,", secret: swVectorSecret, sig: "v1,", wantErr: signature.ErrMalformed},
		{name: "truncated signature", secret: swVectorSecret, sig: swVectorSignature[:8], wantErr: signature.ErrMalformed},
		{name: "garbage signature", secret: swVectorSecret, sig: swVectorGarbage, wantErr: signature.ErrMalformed},
		{name: "v1a only", secret: swVectorSecret, sig: swVectorV1aEntry, wantErr: signature.ErrMismatch},
		{name: "invalid timestamp hello", secret: swVectorSecret, ts: "hello", sig: swVectorSignature, wantErr: signature.ErrMalformed},
		{name: "too old for now", secret: swVectorSecret, sig: swVectorSignature, now: swVectorTime.Add(5*time.Minute + time.Second), wantErr: signature.ErrExpired},
		{name: "too new for now", secret: swVectorSecret, sig: swVectorSignature, now: swVectorTime.Add(-5*time.Minute - time.Second), wantErr: signature.ErrExpired},
		{name: "timestamp 2000-01-01", secret: swVectorSecret, ts: strconv.FormatInt(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), 10), sig: swVectorSignature, wantErr: signature.ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := mustNew(t, signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{tt.secret}})
			ts := tt.ts
			if ts == "" {
				ts = swVectorTimestamp
			}
			now := tt.now
			if now.IsZero() {
				now = swVectorTime
			}
			h := headerOf("webhook-id", swVectorID, "webhook-timestamp", ts, "webhook-signature", tt.sig)
			res, err := v.Verify(h, []byte(swVectorPayload), now)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assertSafeError(t, err, tt.secret, swVectorSignature[3:])
				return
			}
			require.NoError(t, err)
			require.Equal(t, swVectorID, res.EventID)
		})
	}
}

// swSign signs independently of the package: base64(HMAC(key, id.ts.body)).
func swSign(key []byte, id, ts, body string) string {
	return "v1," + base64.StdEncoding.EncodeToString(rawMAC(key, id, ".", ts, ".", body))
}

func whsec(key []byte) string { return "whsec_" + base64.StdEncoding.EncodeToString(key) }

func TestStandardWebhooksVerify(t *testing.T) {
	t.Parallel()
	const (
		id   = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
		body = `{"type":"contact.created","data":{"id":"1f81eb52"}}`
	)
	ts := strconv.FormatInt(testNow.Unix(), 10)
	goodA := swSign(keyA, id, ts, body)
	goodB := swSign(keyB, id, ts, body)
	at := func(d time.Duration) string { return strconv.FormatInt(testNow.Add(d).Unix(), 10) }

	tests := []struct {
		name    string
		secrets []string
		tol     time.Duration
		h       http.Header
		body    string
		wantErr error
		wantMsg string
	}{
		{name: "valid", secrets: []string{whsec(keyA)},
			h: headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", goodA)},
		{name: "wrong secret", secrets: []string{whsec(keyB)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", goodA),
			wantErr: signature.ErrMismatch, wantMsg: "webhook-signature: no signature matched"},
		{name: "rotation: second of two secrets matches", secrets: []string{whsec(keyB), whsec(keyA)},
			h: headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", goodA)},
		{name: "rotation: first of two secrets matches", secrets: []string{whsec(keyB), whsec(keyA)},
			h: headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", goodB)},
		{name: "multiple entries, only the second matches", secrets: []string{whsec(keyA)},
			h: headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", goodB+" "+goodA)},
		{name: "sender signs with old and new key", secrets: []string{whsec(keyA)},
			h: headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", goodA+"  "+goodB)},
		{name: "missing webhook-id", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-timestamp", ts, "webhook-signature", goodA),
			wantErr: signature.ErrMissing, wantMsg: "webhook-id: missing signature header"},
		{name: "missing webhook-timestamp", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-signature", goodA),
			wantErr: signature.ErrMissing, wantMsg: "webhook-timestamp: missing signature header"},
		{name: "missing webhook-signature", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", ts),
			wantErr: signature.ErrMissing, wantMsg: "webhook-signature: missing signature header"},
		{name: "empty webhook-signature", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", ""),
			wantErr: signature.ErrMissing},
		{name: "no headers at all", secrets: []string{whsec(keyA)}, h: http.Header{}, wantErr: signature.ErrMissing},
		{name: "malformed signature header", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", "not-a-signature"),
			wantErr: signature.ErrMalformed},
		{name: "v1 entry not base64", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", "v1,"+strings.Repeat("*", 44)),
			wantErr: signature.ErrMalformed},
		{name: "malformed entry next to a good one is ignored", secrets: []string{whsec(keyA)},
			h: headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", "junk v1,@@@ "+goodA)},
		{name: "tampered body", secrets: []string{whsec(keyA)}, body: body + " ",
			h:       headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", goodA),
			wantErr: signature.ErrMismatch},
		{name: "tampered id", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id+"x", "webhook-timestamp", ts, "webhook-signature", goodA),
			wantErr: signature.ErrMismatch},
		{name: "expired: too old", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", at(-6*time.Minute), "webhook-signature", swSign(keyA, id, at(-6*time.Minute), body)),
			wantErr: signature.ErrExpired, wantMsg: "webhook-timestamp too old: timestamp outside the tolerance window"},
		{name: "expired: future", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", at(6*time.Minute), "webhook-signature", swSign(keyA, id, at(6*time.Minute), body)),
			wantErr: signature.ErrExpired, wantMsg: "too far in the future"},
		{name: "edge of the window is accepted", secrets: []string{whsec(keyA)},
			h: headerOf("webhook-id", id, "webhook-timestamp", at(-5*time.Minute), "webhook-signature", swSign(keyA, id, at(-5*time.Minute), body))},
		{name: "custom tolerance", secrets: []string{whsec(keyA)}, tol: 10 * time.Minute,
			h: headerOf("webhook-id", id, "webhook-timestamp", at(-6*time.Minute), "webhook-signature", swSign(keyA, id, at(-6*time.Minute), body))},
		{name: "non-numeric timestamp", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", "yesterday", "webhook-signature", goodA),
			wantErr: signature.ErrMalformed, wantMsg: "webhook-timestamp is not a unix timestamp in seconds"},
		{name: "signed timestamp", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", "+"+ts, "webhook-signature", swSign(keyA, id, "+"+ts, body)),
			wantErr: signature.ErrMalformed},
		{name: "fractional timestamp", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", ts+".5", "webhook-signature", goodA),
			wantErr: signature.ErrMalformed},
		{name: "milliseconds timestamp is far in the future", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", ts+"000", "webhook-signature", goodA),
			wantErr: signature.ErrExpired},
		{name: "huge timestamp", secrets: []string{whsec(keyA)},
			h:       headerOf("webhook-id", id, "webhook-timestamp", strings.Repeat("9", 40), "webhook-signature", goodA),
			wantErr: signature.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := mustNew(t, signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: tt.secrets, Tolerance: tt.tol})
			b := tt.body
			if b == "" {
				b = body
			}
			res, err := v.Verify(tt.h, []byte(b), testNow)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				if tt.wantMsg != "" {
					require.Contains(t, err.Error(), tt.wantMsg)
				}
				require.Empty(t, res.EventID)
				assertSafeError(t, err, append(tt.secrets, goodA[3:], goodB[3:])...)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.h.Get("webhook-id"), res.EventID)
		})
	}
}

func TestSignStandardWebhooksRejectsBadSecret(t *testing.T) {
	t.Parallel()
	_, err := signature.SignStandardWebhooks("whsec_***", "id", testNow, nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "***")

	sig, err := signature.SignStandardWebhooks(whsec(keyA), "id", testNow, []byte("b"))
	require.NoError(t, err)
	require.Equal(t, swSign(keyA, "id", strconv.FormatInt(testNow.Unix(), 10), "b"), sig)
}

func TestStandardWebhooksConcurrent(t *testing.T) {
	t.Parallel()
	v := mustNew(t, signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{whsec(keyB), whsec(keyA)}})
	ts := strconv.FormatInt(testNow.Unix(), 10)
	done := make(chan error)
	for g := range 8 {
		go func() {
			var err error
			for i := range 200 {
				id := "msg_" + strconv.Itoa(g) + "_" + strconv.Itoa(i)
				body := strings.Repeat("x", i)
				key := keyA
				if i%2 == 0 {
					key = keyB
				}
				h := headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", swSign(key, id, ts, body))
				var res signature.Result
				if res, err = v.Verify(h, []byte(body), testNow); err != nil {
					break
				}
				if res.EventID != id {
					err = signature.ErrMismatch
					break
				}
				if _, bad := v.Verify(h, []byte(body+"!"), testNow); bad == nil {
					err = signature.ErrMismatch
					break
				}
			}
			done <- err
		}()
	}
	for range 8 {
		require.NoError(t, <-done)
	}
}

func FuzzStandardWebhooksVerify(f *testing.F) {
	ts := strconv.FormatInt(testNow.Unix(), 10)
	good := swSign(keyA, "msg_1", ts, `{"a":1}`)
	f.Add("msg_1", ts, good, []byte(`{"a":1}`), int64(0))
	f.Add(swVectorID, swVectorTimestamp, swVectorSignature, []byte(swVectorPayload), int64(-30))
	f.Add("msg_1", ts, good+" "+swVectorV1aEntry, []byte(`{"a":1}`), int64(299))
	f.Add("msg_1", ts, "v1,", []byte{}, int64(-299))
	f.Add("msg_1", "hello", "v1,"+strings.Repeat("A", 44), []byte("x"), int64(1))
	f.Add("", "", "", []byte(nil), int64(0))
	f.Add("a.b", "-1", " , ,, v1 v1,= v2,x", []byte("\x00\xff"), int64(7))
	f.Add("msg", strings.Repeat("9", 19), "v1,"+strings.Repeat("=", 44), []byte("{}"), int64(-1))
	f.Add("msg\n", "0", good+"\t"+good, []byte("body"), int64(3))

	v := mustNew(f, signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{whsec(keyB), whsec(keyA)}})
	f.Fuzz(func(t *testing.T, id, tsHeader, sigHeader string, body []byte, skew int64) {
		// 1. Arbitrary input: never panics, and only ever fails with a sentinel.
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", tsHeader)
		h.Set("webhook-signature", sigHeader)
		res, err := v.Verify(h, body, testNow)
		if err != nil {
			require.True(t, isSentinel(err), "unexpected error %v", err)
			require.Empty(t, res.EventID)
		} else {
			require.Equal(t, id, res.EventID)
		}

		// 2. Property: a correctly signed request inside the window verifies,
		// whatever the id, body and skew, and the same request with the body
		// changed does not.
		if id == "" {
			id = "msg"
		}
		at := testNow.Add(time.Duration(skew%300) * time.Second)
		sig, err := signature.SignStandardWebhooks(whsec(keyA), id, at, body)
		require.NoError(t, err)
		h = http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		h.Set("webhook-signature", sigHeader+" "+sig)
		res, err = v.Verify(h, body, testNow)
		require.NoError(t, err)
		require.Equal(t, id, res.EventID)

		_, err = v.Verify(h, append(append([]byte(nil), body...), '!'), testNow)
		require.Error(t, err)
	})
}

func BenchmarkStandardWebhooksVerify(b *testing.B) {
	body := []byte(strings.Repeat(`{"k":"v"},`, 102)) // ~1 KB
	ts := strconv.FormatInt(testNow.Unix(), 10)
	h := headerOf("webhook-id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "webhook-timestamp", ts,
		"webhook-signature", swSign(keyA, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", ts, string(body)))
	v := mustNew(b, signature.Config{Scheme: signature.SchemeStandardWebhooks, Secrets: []string{whsec(keyA)}})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(h, body, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
