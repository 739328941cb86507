package platform_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// Test keys of the wechatpay-v3 preset: a 32-byte APIv3 key and the ids
// WeChat Pay gives its keys.
const (
	wechatAPIv3Key = "callgate0test0apiv3key0032bytes!"
	wechatPubKeyID = "PUB_KEY_ID_0114232134912410000000000000"
	wechatMchID    = "1230000109"
)

var (
	wechatSerialA = new(big.Int).SetUint64(0x5157F09EFDC096DE)
	wechatSerialB = new(big.Int).SetUint64(0x7A2B0C3D4E5F6071)
)

// wechatTransaction is the decrypted resource of a payment notification,
// shaped like the documented example.
func wechatTransaction(order, txn, state string, total int64) string {
	return fmt.Sprintf(`{"mchid":`+strconv.Quote(wechatMchID)+`,"appid":"wxd678efh567hg6787","out_trade_no":%q,"transaction_id":%q,`+
		`"trade_type":"JSAPI","trade_state":%q,"trade_state_desc":"支付成功","bank_type":"CMC","attach":"",`+
		`"success_time":"2018-06-08T10:34:56+08:00","payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},`+
		`"amount":{"total":%d,"payer_total":%d,"currency":"CNY","payer_currency":"CNY"}}`, order, txn, state, total, total)
}

// wechatEncrypt seals plaintext as WeChat Pay does: AES-GCM keyed with the
// APIv3 key, a 12-character nonce, base64 of data||tag.
func wechatEncrypt(key, plaintext, aad string) (ciphertext, nonce string) {
	block, err := aes.NewCipher([]byte(key))
	if err != nil {
		panic(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	nonce = rand.Text()[:12]
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), []byte(plaintext), []byte(aad))), nonce
}

// wechatNotification is the JSON body around plaintext, encrypted with key.
func wechatNotification(id, eventType, originalType, key, plaintext string) []byte {
	ct, nonce := wechatEncrypt(key, plaintext, originalType)
	b, err := json.Marshal(map[string]any{
		"id": id, "create_time": "2018-06-08T10:34:56+08:00", "resource_type": "encrypt-resource",
		"event_type": eventType, "summary": "支付成功",
		"resource": map[string]string{"original_type": originalType, "algorithm": "AEAD_AES_256_GCM",
			"ciphertext": ct, "associated_data": originalType, "nonce": nonce},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// wechatPaid is a TRANSACTION.SUCCESS notification encrypted with the
// test APIv3 key.
func wechatPaid(id, order, txn, state string, total int64) []byte {
	return wechatNotification(id, "TRANSACTION.SUCCESS", "transaction", wechatAPIv3Key, wechatTransaction(order, txn, state, total))
}

// wechatSigned is the headers WeChat Pay sends with body: signed with k at
// ts, naming the key serial.
func wechatSigned(k *rsa.PrivateKey, serial string, body []byte, ts time.Time) http.Header {
	stamp, nonce := strconv.FormatInt(ts.Unix(), 10), rand.Text()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Wechatpay-Serial", serial)
	h.Set("Wechatpay-Timestamp", stamp)
	h.Set("Wechatpay-Nonce", nonce)
	h.Set("Wechatpay-Signature", testenv.SignSHA256WithRSA(k, []byte(stamp+"\n"+nonce+"\n"+string(body)+"\n")))
	h.Set("Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048")
	h.Set("Request-ID", "08F78BB5AF0610D302839A1B1C9A03E2")
	return h
}

// wechatKeyConfig configures the WeChat Pay public key (key 0).
func wechatKeyConfig() platform.Config {
	return platform.Config{MchID: wechatMchID, APIv3Key: wechatAPIv3Key,
		PublicKeys: []platform.PublicKey{{ID: wechatPubKeyID, Key: testenv.RSAPublicKeyPEM(testenv.RSAKeys()[0])}}}
}

// requireWeChatRefusal asserts a refusal in WeChat Pay's words.
func requireWeChatRefusal(t *testing.T, a testenv.RawAnswer, status int, msg string) string {
	t.Helper()
	require.Equal(t, status, a.Status, "%s: %s", msg, a.Body)
	var body struct{ Code, Message string }
	require.NoError(t, json.Unmarshal(a.Body, &body), msg)
	require.Equal(t, "FAIL", body.Code, msg)
	require.NotEmpty(t, body.Message, msg)
	return body.Message
}

func TestWeChatPayPaysTheOrder(t *testing.T) {
	p := testenv.StartPlatform(t, "wechatpay", wechatKeyConfig())
	p.CreateOrder(t, "WX-ORD-1", 100, "CNY")
	body := wechatPaid("EV-2018022511223320873", "WX-ORD-1", "4200000001201807033233368018", "SUCCESS", 100)

	a := p.Post(t, "wechatpay", body, wechatSigned(testenv.RSAKeys()[0], wechatPubKeyID, body, time.Now()))
	require.Equal(t, http.StatusNoContent, a.Status, string(a.Body))
	require.Empty(t, a.Body)
	row := p.Settled(t, "wechatpay", "EV-2018022511223320873")
	require.Equal(t, "WX-ORD-1", row.BusinessKey)
	require.Equal(t, body, row.Payload, "the raw body is stored byte for byte")
	var ev callback.PaymentEvent
	require.NoError(t, json.Unmarshal(row.Normalized, &ev))
	require.NotNil(t, ev.PaidAt)
	require.True(t, time.Date(2018, 6, 8, 2, 34, 56, 0, time.UTC).Equal(*ev.PaidAt), "success_time %s", ev.PaidAt)
	require.Equal(t, callback.PaymentEvent{OrderCode: "WX-ORD-1", PaymentNo: "4200000001201807033233368018", Amount: 100,
		Currency: "CNY", Status: callback.PaymentSuccess, PaidAt: ev.PaidAt}, ev)
	o := p.Order(t, "WX-ORD-1")
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Equal(t, "4200000001201807033233368018", *o.PaymentNo)

	// WeChat Pay resends the same notification (new timestamp and nonce).
	again := p.Post(t, "wechatpay", body, wechatSigned(testenv.RSAKeys()[0], wechatPubKeyID, body, time.Now()))
	require.Equal(t, http.StatusNoContent, again.Status, string(again.Body))
	require.Equal(t, 1, p.Callbacks(t, "wechatpay"), "the resend is a duplicate")
}

func TestWeChatPayCertificatesAndRotation(t *testing.T) {
	k := testenv.RSAKeys()
	serialA, serialB := fmt.Sprintf("%X", wechatSerialA), fmt.Sprintf("%X", wechatSerialB)
	cfg := wechatKeyConfig()
	// The old platform certificate, the new one, and the public key WeChat
	// Pay is moving the merchant to, all at once.
	cfg.Certificates = []string{testenv.RSACertificatePEM(k[1], wechatSerialA) + testenv.RSACertificatePEM(k[2], wechatSerialB)}
	p := testenv.StartPlatform(t, "wechatpay", cfg)
	for i, signer := range []struct {
		key    *rsa.PrivateKey
		serial string
	}{{k[0], wechatPubKeyID}, {k[1], serialA}, {k[2], serialB}, {k[1], "5157f09efdc096de"}} {
		order, id := fmt.Sprintf("WX-ROT-%d", i), fmt.Sprintf("EV-ROT-%d", i)
		p.CreateOrder(t, order, 2500, "CNY")
		body := wechatPaid(id, order, "42000000"+id, "SUCCESS", 2500)
		a := p.Post(t, "wechatpay", body, wechatSigned(signer.key, signer.serial, body, time.Now()))
		require.Equal(t, http.StatusNoContent, a.Status, "%s: %s", signer.serial, a.Body)
		p.Settled(t, "wechatpay", id)
		require.Equal(t, payment.OrderPaid, p.Order(t, order).PaymentStatus, "the key %s verifies", signer.serial)
	}
}

func TestWeChatPayClosedAndNotPaid(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "wechatpay", wechatKeyConfig())
	p.CreateOrder(t, "WX-CLOSED", 300, "CNY")
	closed := wechatPaid("EV-CLOSED", "WX-CLOSED", "4200000000000000000000000001", "CLOSED", 300)
	require.Equal(t, http.StatusNoContent, p.Post(t, "wechatpay", closed, wechatSigned(k, wechatPubKeyID, closed, time.Now())).Status)
	p.Settled(t, "wechatpay", "EV-CLOSED")
	require.Equal(t, payment.OrderClosed, p.Order(t, "WX-CLOSED").PaymentStatus)

	p.CreateOrder(t, "WX-NOTPAY", 300, "CNY")
	notpay := wechatPaid("EV-NOTPAY", "WX-NOTPAY", "4200000000000000000000000002", "NOTPAY", 300)
	require.Equal(t, http.StatusNoContent, p.Post(t, "wechatpay", notpay, wechatSigned(k, wechatPubKeyID, notpay, time.Now())).Status)
	row := p.Settled(t, "wechatpay", "EV-NOTPAY")
	require.Equal(t, "WX-NOTPAY", row.BusinessKey)
	require.Contains(t, p.LastNote(t, row.ID), "NOTPAY", "the attempt says why nothing changed")
	o := p.Order(t, "WX-NOTPAY")
	require.Equal(t, payment.OrderUnpaid, o.PaymentStatus, "no business effect")
	require.Nil(t, o.PaymentNo)
}

func TestWeChatPayRefusals(t *testing.T) {
	k := testenv.RSAKeys()
	p := testenv.StartPlatform(t, "wechatpay", wechatKeyConfig())
	p.CreateOrder(t, "WX-BAD", 100, "CNY")
	body := wechatPaid("EV-BAD", "WX-BAD", "4200000000000000000000000009", "SUCCESS", 100)
	now := time.Now()
	good := func() http.Header { return wechatSigned(k[0], wechatPubKeyID, body, now) }
	with := func(name, value string) http.Header { h := good(); h.Set(name, value); return h }
	sig := good().Get("Wechatpay-Signature")
	foreign := wechatNotification("EV-BAD", "TRANSACTION.SUCCESS", "transaction", "another0apiv3key0of0thirty2bytes",
		wechatTransaction("WX-BAD", "4200000000000000000000000009", "SUCCESS", 100))
	other := bytes.Replace(body, []byte(`"EV-BAD"`), []byte(`"EV-BAE"`), 1)
	cases := []struct {
		name   string
		body   []byte
		h      http.Header
		status int
		says   string
	}{
		{"wrong signature", body, with("Wechatpay-Signature", sig[:10]+map[bool]string{true: "B", false: "A"}[sig[10] == 'A']+sig[11:]), 401, "no signature matched"},
		{"signature probe", body, with("Wechatpay-Signature", "WECHATPAY/SIGNTEST/"+sig), 401, "signature probe"},
		{"tampered body", other, good(), 401, "no signature matched"},
		{"stale timestamp", body, wechatSigned(k[0], wechatPubKeyID, body, now.Add(-6*time.Minute)), 401, "too old"},
		{"future timestamp", body, wechatSigned(k[0], wechatPubKeyID, body, now.Add(6*time.Minute)), 401, "too far in the future"},
		{"unknown serial", body, wechatSigned(k[0], "PUB_KEY_ID_0999", body, now), 401, `Wechatpay-Serial "PUB_KEY_ID_0999"`},
		{"wrong key", body, wechatSigned(k[1], wechatPubKeyID, body, now), 401, "no signature matched"},
		{"another APIv3 key", foreign, wechatSigned(k[0], wechatPubKeyID, foreign, now), 400, "could not be decrypted"},
	}
	for _, c := range cases {
		msg := requireWeChatRefusal(t, p.Post(t, "wechatpay", c.body, c.h), c.status, c.name)
		require.Contains(t, msg, c.says, c.name)
	}
	require.Zero(t, p.Callbacks(t, "wechatpay"), "nothing refused is stored")
	require.Equal(t, payment.OrderUnpaid, p.Order(t, "WX-BAD").PaymentStatus)
}
