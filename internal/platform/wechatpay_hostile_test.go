package platform_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// wechatEnvelope is a notification body around an already encrypted
// resource, with its fields given as they should appear.
func wechatEnvelope(id, algorithm, ciphertext, aad, nonce string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "event_type": "TRANSACTION.SUCCESS", "resource_type": "encrypt-resource",
		"resource": map[string]string{"original_type": "transaction", "algorithm": algorithm, "ciphertext": ciphertext,
			"associated_data": aad, "nonce": nonce}})
	return b
}

func TestWeChatPayHostile(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "wechatpay", wechatKeyConfig())
	now := time.Now()
	valid := wechatPaid("EV-HOSTILE", "WX-HOSTILE", "4200000000000000000000000042", "SUCCESS", 100)
	signed := func(body []byte) http.Header { return wechatSigned(k, wechatPubKeyID, body, now) }
	without := func(name string) http.Header { h := signed(valid); h.Del(name); return h }
	with := func(name, value string) http.Header { h := signed(valid); h.Set(name, value); return h }
	txn := wechatTransaction("WX-HOSTILE", "4200000000000000000000000042", "SUCCESS", 100)
	ct, nonce := wechatEncrypt(wechatAPIv3Key, txn, "transaction")
	notJSON, notJSONNonce := wechatEncrypt(wechatAPIv3Key, "<xml>not json</xml>", "transaction")
	cases := []struct {
		name string
		body []byte
		h    http.Header
	}{
		{"no Wechatpay-Serial", valid, without("Wechatpay-Serial")},
		{"no Wechatpay-Signature", valid, without("Wechatpay-Signature")},
		{"no Wechatpay-Timestamp", valid, without("Wechatpay-Timestamp")},
		{"no Wechatpay-Nonce", valid, without("Wechatpay-Nonce")},
		{"no Content-Type", valid, without("Content-Type")},
		{"form Content-Type", valid, with("Content-Type", "application/x-www-form-urlencoded")},
		{"1000-digit timestamp", valid, with("Wechatpay-Timestamp", strings.Repeat("9", 1000))},
		{"negative timestamp", valid, with("Wechatpay-Timestamp", "-1")},
		{"timestamp in milliseconds", valid, with("Wechatpay-Timestamp", fmt.Sprint(now.UnixMilli()))},
		{"base64 garbage signature", valid, with("Wechatpay-Signature", "!!!!not*base64!!!!")},
		{"huge signature", valid, with("Wechatpay-Signature", strings.Repeat("QUJD", 2<<10))},
		{"other signature type", valid, with("Wechatpay-Signature-Type", "WECHATPAY2-SHA1-RSA1024")},
		{"truncated body", valid[:len(valid)/2], signed(valid)},
		{"non-UTF-8 byte in body", append([]byte{0xff}, valid[1:]...), signed(valid)},
		{"empty body, signed", nil, signed(nil)},
		{"form body, signed", []byte("notify_id=1&sign=x"), signed([]byte("notify_id=1&sign=x"))},
		{"JSON null, signed", []byte("null"), signed([]byte("null"))},
		{"JSON array, signed", []byte("[]"), signed([]byte("[]"))},
		{"no resource, signed", []byte(`{"id":"EV-1"}`), signed([]byte(`{"id":"EV-1"}`))},
		{"id too long, signed", wechatNotification(strings.Repeat("E", 300), "TRANSACTION.SUCCESS", "transaction", wechatAPIv3Key, txn), nil},
		{"AES-128 algorithm, signed", wechatEnvelope("EV-1", "AEAD_AES_128_GCM", ct, "transaction", nonce), nil},
		{"wrong associated data, signed", wechatEnvelope("EV-1", "AEAD_AES_256_GCM", ct, "", nonce), nil},
		{"8-byte nonce, signed", wechatEnvelope("EV-1", "AEAD_AES_256_GCM", ct, "transaction", nonce[:8]), nil},
		{"ciphertext base64 garbage, signed", wechatEnvelope("EV-1", "AEAD_AES_256_GCM", "%%"+ct, "transaction", nonce), nil},
		{"resource not JSON, signed", wechatEnvelope("EV-1", "AEAD_AES_256_GCM", notJSON, "transaction", notJSONNonce), nil},
	}
	for i := range cases {
		if cases[i].h == nil {
			cases[i].h = signed(cases[i].body)
		}
	}
	for _, c := range cases {
		a := p.Post(t, "wechatpay", c.body, c.h)
		require.True(t, a.Status >= 400 && a.Status < 600, "%s: %d %s", c.name, a.Status, a.Body)
		t.Logf("%s: %d %s", c.name, a.Status, requireWeChatRefusal(t, a, a.Status, c.name))
	}
	require.Zero(t, p.Callbacks(t, "wechatpay"), "nothing hostile is stored")
	p.CreateOrder(t, "WX-HOSTILE", 100, "CNY")
	// Signed, decrypted and ours, but unreadable: stored, answered 204,
	// FAILED with the reason.
	for i, c := range []struct{ name, plain, reason string }{
		{"amount not an integer", strings.Replace(txn, `"total":100`, `"total":1.5`, 1), `field "amount.total" must be a string or an integer`},
		{"negative amount", strings.Replace(txn, `"total":100`, `"total":-100`, 1), `amount.total: amount "-100" is not a decimal number`},
		{"no transaction_id", strings.Replace(txn, `"transaction_id"`, `"txn"`, 1), `field "transaction_id" is missing`},
	} {
		id := fmt.Sprintf("EV-UNREAD-%d", i)
		body := wechatNotification(id, "TRANSACTION.SUCCESS", "transaction", wechatAPIv3Key, c.plain)
		a := p.Post(t, "wechatpay", body, signed(body))
		require.Equal(t, http.StatusNoContent, a.Status, "%s: %s", c.name, a.Body)
		row := p.St.WaitStatus(t, logIDOf(t, p, "wechatpay", id), callback.StatusFailed)
		require.Equal(t, "the notification could not be read: "+c.reason, *row.LastError, c.name)
	}
	require.Equal(t, payment.OrderUnpaid, p.Order(t, "WX-HOSTILE").PaymentStatus)
	a := p.Post(t, "wechatpay", valid, wechatSigned(k, wechatPubKeyID, valid, time.Now()))
	require.Equal(t, http.StatusNoContent, a.Status, "a valid notification after them: %s", a.Body)
	p.Settled(t, "wechatpay", "EV-HOSTILE")
}

func TestWeChatPayReadMapping(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p, err := platform.New("wechatpay-v3", wechatKeyConfig())
	require.NoError(t, err)
	read := func(body []byte) (callback.PaymentEvent, platform.Callback, error) {
		now := time.Now()
		cbs, err := p.Read(platform.Request{Header: wechatSigned(k, wechatPubKeyID, body, now), Body: body, Now: now})
		if err != nil {
			return callback.PaymentEvent{}, platform.Callback{}, err
		}
		require.Len(t, cbs, 1)
		return cbs[0].Event.(callback.PaymentEvent), cbs[0], nil
	}
	for state, want := range map[string]string{"SUCCESS": callback.PaymentSuccess,
		"REVOKED": callback.PaymentFailed, "PAYERROR": callback.PaymentFailed} {
		ev, cb, err := read(wechatPaid("EV-"+state, "WX-M", "T-"+state, state, 1999))
		require.NoError(t, err, state)
		require.Equal(t, want, ev.Status, state)
		require.Equal(t, "T-"+state, ev.PaymentNo, state)
		require.EqualValues(t, 1999, ev.Amount, state)
		require.Equal(t, "WX-M", cb.BusinessKey, state)
		require.Equal(t, "EV-"+state, cb.EventID, state)
	}
	for _, state := range []string{"NOTPAY", "USERPAYING", "REFUND"} {
		ev, cb, err := read(wechatPaid("EV-"+state, "WX-M", "T", state, 1))
		require.NoError(t, err, state)
		require.Contains(t, ev.Ignored, state)
		require.Equal(t, "WX-M", cb.BusinessKey)
	}
	closed := strings.Replace(wechatTransaction("WX-C", "T", "CLOSED", 5), `"transaction_id":"T",`, "", 1)
	ev, _, err := read(wechatNotification("EV-C", "TRANSACTION.CLOSED", "transaction", wechatAPIv3Key, closed))
	require.NoError(t, err)
	created := time.Date(2018, time.June, 8, 2, 34, 56, 0, time.UTC) // the notification's create_time
	require.Equal(t, callback.PaymentEvent{Type: callback.TypeClose, OrderCode: "WX-C", Reason: "wechat pay trade_state CLOSED", OccurredAt: &created}, ev,
		"an order closed before any payment closes it")
	refund := `{"mchid":"` + wechatMchID + `","out_trade_no":"WX-R","transaction_id":"T","out_refund_no":"R1","refund_id":"RF1","refund_status":"SUCCESS","amount":{"total":5,"refund":5}}`
	ev, cb, err := read(wechatNotification("EV-R", "REFUND.SUCCESS", "refund", wechatAPIv3Key, refund))
	require.NoError(t, err)
	require.Equal(t, callback.PaymentEvent{Type: callback.TypeRefund, OrderCode: "WX-R", PaymentNo: "T", RefundNo: "RF1", Amount: 5,
		Currency: "CNY", Status: callback.RefundSuccess, OccurredAt: &created}, ev, "a refund is a refund")
	require.Equal(t, "WX-R", cb.BusinessKey)

	body := wechatPaid("EV-X", "WX-X", "T", "SUCCESS", 1)
	h := wechatSigned(k, wechatPubKeyID, body, time.Now())
	h.Set("Content-Type", "application/json; charset=utf-8")
	_, err = p.Read(platform.Request{Header: h, Body: body, Now: time.Now()})
	require.NoError(t, err, "a charset parameter is fine")
	h.Del("Wechatpay-Signature-Type")
	_, err = p.Read(platform.Request{Header: h, Body: body, Now: time.Now()})
	require.NoError(t, err, "without Wechatpay-Signature-Type the SDK's default applies")
}

func FuzzWeChatPayRead(f *testing.F) {
	k := testenv.RSAKeys()[0]
	p, err := platform.New("wechatpay-v3", wechatKeyConfig())
	require.NoError(f, err)
	at := time.Unix(1760000000, 0)
	valid := wechatPaid("EV-FUZZ", "WX-FUZZ", "T-FUZZ", "SUCCESS", 100)
	h := wechatSigned(k, wechatPubKeyID, valid, at)
	f.Add(valid, "", h.Get("Wechatpay-Serial"), h.Get("Wechatpay-Signature"), h.Get("Wechatpay-Timestamp"), h.Get("Wechatpay-Nonce"))
	f.Add(valid, wechatTransaction("WX-FUZZ", "T", "CLOSED", 1), "", "", "", "")
	f.Add([]byte(`{"id":"x","resource":{}}`), `{"amount":{"total":1e999}}`, "", "", "", "")
	f.Add([]byte("null"), "", wechatPubKeyID, "WECHATPAY/SIGNTEST/AAAA", "1760000000", "n")
	f.Add([]byte{}, "", "", "", strings.Repeat("9", 40), "")
	// With a plaintext, the harness encrypts and signs it itself, so the
	// fuzzer reaches what comes after the signature and the decryption.
	f.Fuzz(func(t *testing.T, body []byte, plaintext, serial, sig, ts, nonce string) {
		h := http.Header{"Content-Type": {"application/json"}}
		if plaintext != "" {
			body = wechatNotification("EV-FUZZ", "TRANSACTION.SUCCESS", "transaction", wechatAPIv3Key, plaintext)
			h = wechatSigned(k, wechatPubKeyID, body, at)
		} else {
			for name, v := range map[string]string{"Wechatpay-Serial": serial, "Wechatpay-Signature": sig,
				"Wechatpay-Timestamp": ts, "Wechatpay-Nonce": nonce} {
				h[name] = []string{v}
			}
		}
		cbs, err := p.Read(platform.Request{Header: h, Body: body, Now: at})
		if err != nil {
			require.Nil(t, cbs)
			require.NotContains(t, err.Error(), wechatAPIv3Key)
			return
		}
		require.Len(t, cbs, 1)
		requireCanonical(t, cbs[0])
	})
}

func BenchmarkWeChatPayRead(b *testing.B) {
	k := testenv.RSAKeys()[0]
	p, err := platform.New("wechatpay-v3", wechatKeyConfig())
	require.NoError(b, err)
	now := time.Now()
	body := wechatPaid("EV-BENCH", "WX-BENCH", "4200000000000000000000000001", "SUCCESS", 100)
	req := platform.Request{Header: wechatSigned(k, wechatPubKeyID, body, now), Body: body, Now: now}
	benchRead(b, p, req)
}

func TestWeChatPayConfiguration(t *testing.T) {
	k := testenv.RSAKeys()
	vars := []string{"WECHATPAY_APIV3_KEY", "WECHATPAY_PUBLIC_KEY_ID", "WECHATPAY_PUBLIC_KEY", "WECHATPAY_PLATFORM_CERTS"}
	for _, v := range vars {
		unsetEnv(t, v, v+"_FILE")
	}
	t.Setenv("WECHATPAY_MCHID", wechatMchID)
	cfg, err := loadShipped(t)
	require.NoError(t, err)
	require.True(t, shippedSource(t, cfg, "wechatpay").Disabled(), "without keys the wechatpay source is disabled")
	t.Setenv("WECHATPAY_PUBLIC_KEY_ID", wechatPubKeyID)
	cfg, err = loadShipped(t)
	require.NoError(t, err)
	require.True(t, shippedSource(t, cfg, "wechatpay").Disabled(), "a key id without its key enables nothing")

	t.Setenv("WECHATPAY_APIV3_KEY", "short-apiv3-key-value")
	t.Setenv("WECHATPAY_PUBLIC_KEY", testenv.RSAPublicKeyPEM(k[0]))
	_, err = loadShipped(t)
	require.Regexp(t, `sources\[\d+\] \(wechatpay\)\.platform\.apiv3_key: must be 32 bytes .*, not 21`, err)
	require.NotContains(t, err.Error(), "short-apiv3-key-value", "the error does not repeat the key")

	t.Setenv("WECHATPAY_APIV3_KEY", wechatAPIv3Key)
	t.Setenv("WECHATPAY_PUBLIC_KEY_ID", "")
	_, err = loadShipped(t)
	require.ErrorContains(t, err, "(wechatpay).platform.public_keys[0].id: is required")
	t.Setenv("WECHATPAY_PUBLIC_KEY_ID", wechatPubKeyID)
	t.Setenv("WECHATPAY_PUBLIC_KEY", "-----BEGIN PUBLIC KEY-----\ngarbage")
	_, err = loadShipped(t)
	require.ErrorContains(t, err, "(wechatpay).platform.public_keys[0].key: the PEM block is not well formed")
	t.Setenv("WECHATPAY_PUBLIC_KEY", "")
	t.Setenv("WECHATPAY_PLATFORM_CERTS", testenv.RSAPublicKeyPEM(k[1]))
	_, err = loadShipped(t)
	require.ErrorContains(t, err, `(wechatpay).platform.certificates[0]: certificate 1: PEM type "PUBLIC KEY" is not CERTIFICATE`)
	t.Setenv("WECHATPAY_PLATFORM_CERTS", "")
	_, err = loadShipped(t)
	require.ErrorContains(t, err, "(wechatpay).platform.public_keys: at least one WeChat Pay public key")

	// From mounted files: the public key and a bundle of two certificates.
	dir := t.TempDir()
	for name, content := range map[string]string{"pub.pem": testenv.RSAPublicKeyPEM(k[0]),
		"certs.pem": testenv.RSACertificatePEM(k[1], wechatSerialA) + testenv.RSACertificatePEM(k[2], wechatSerialB)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	os.Unsetenv("WECHATPAY_PUBLIC_KEY")
	os.Unsetenv("WECHATPAY_PLATFORM_CERTS")
	t.Setenv("WECHATPAY_PUBLIC_KEY_FILE", filepath.Join(dir, "pub.pem"))
	t.Setenv("WECHATPAY_PLATFORM_CERTS_FILE", filepath.Join(dir, "certs.pem"))
	cfg, err = loadShipped(t)
	require.NoError(t, err)
	src := shippedSource(t, cfg, "wechatpay")
	require.False(t, src.Disabled())
	p, err := platform.New(src.Preset, src.Platform)
	require.NoError(t, err)
	for _, signer := range []struct {
		key    int
		serial string
	}{{0, wechatPubKeyID}, {1, fmt.Sprintf("%X", wechatSerialA)}, {2, fmt.Sprintf("%X", wechatSerialB)}} {
		body := wechatPaid("EV-CFG", "WX-CFG", "T", "SUCCESS", 1)
		_, err = p.Read(platform.Request{Header: wechatSigned(k[signer.key], signer.serial, body, time.Now()), Body: body, Now: time.Now()})
		require.NoError(t, err, "%s from the mounted files verifies", signer.serial)
	}

	_, err = platform.New("wechatpay-v3", platform.Config{APIv3Key: wechatAPIv3Key, SellerID: "x", MchID: wechatMchID,
		PublicKeys: []platform.PublicKey{{ID: "A", Key: testenv.RSAPublicKeyPEM(k[0])}, {ID: "a", Key: testenv.RSAPublicKeyPEM(k[1])}}})
	require.ErrorContains(t, err, "platform.seller_id: does not apply to preset wechatpay-v3")
	_, err = platform.New("wechatpay-v3", platform.Config{APIv3Key: wechatAPIv3Key, MchID: wechatMchID,
		PublicKeys: []platform.PublicKey{{ID: "A", Key: testenv.RSAPublicKeyPEM(k[0])}, {ID: "a", Key: testenv.RSAPublicKeyPEM(k[1])}}})
	require.ErrorContains(t, err, "platform.public_keys[1]: key id a is given twice with different keys")
}
