package platform_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/platform"
	"callgate/internal/signature"
)

// A published vector of wechatpay-go, WeChat Pay's official Go SDK
// (PLATFORMS.md section 2): test data, not code.

// core/notify/notify_test.go TestHandler_ParseNotifyRequest: a full
// notification, its self-signed certificate (serial D7CE59D1F522D701) and
// its 16-byte APIv3 key.
const (
	notifyVectorCert = `-----BEGIN CERTIFICATE-----
MIIDVzCCAj+gAwIBAgIJANfOWdH1ItcBMA0GCSqGSIb3DQEBCwUAMEIxCzAJBgNV
BAYTAlhYMRUwEwYDVQQHDAxEZWZhdWx0IENpdHkxHDAaBgNVBAoME0RlZmF1bHQg
Q29tcGFueSBMdGQwHhcNMjEwNDI3MDg1NTIzWhcNMzEwNDI1MDg1NTIzWjBCMQsw
CQYDVQQGEwJYWDEVMBMGA1UEBwwMRGVmYXVsdCBDaXR5MRwwGgYDVQQKDBNEZWZh
dWx0IENvbXBhbnkgTHRkMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA
2VCTd91fnUn73Xy9DLvt/V62TVxRTEEstVdeRaZ3B3leO0pldE806mXO4RwdHXag
HQ4vGeZN0yqm++rDsGK+U3AH7kejyD2pXshNP9Cq5YwbptiLGtjcquw4HNxJQUOm
DeJf2vg6byms9RUipiq4SzbJKqJFlUpbuIPDpSpWz10PYmyCNeDGUUK65E5h2B83
4uxl1zNLYQCrkdBzb8oUxwYeP5a2DNxmjL5lsJML7DGr5znsevnoqGRwTm9fxCGf
y8wus7hwKz6clt3Whmmda7UAdb1c08hEQFVRbF14AR73xbnd8N0obCWJPCbzMCtk
aSef4FdEEgEXJiw0VAJT8wIDAQABo1AwTjAdBgNVHQ4EFgQUT1c7nd/SUO76HSoZ
umNUJv1R5PwwHwYDVR0jBBgwFoAUT1c7nd/SUO76HSoZumNUJv1R5PwwDAYDVR0T
BAUwAwEB/zANBgkqhkiG9w0BAQsFAAOCAQEAfTjxKRQMzNB/U6ZoCUS+BSNfa2Oh
0plMN6ZuzwiVVZwg1jywvv5yv04koS7Pd4i9E4gt9ZBUQXlpq+A3oOCEEHNRR6b2
kyazGRM7s0OP5X21WrbpSmKmU6K7hkfx30yYs08LVs/Q8DIhvaj1FCFeJzUCzYn/
fHMq4tsbKO0dKAeydPM/nrUZBmaYQVKMVOORGLFjFKVO7JV6Kq/R86ouhjEPgJOe
2xulNBUcjicqtZlBdEh/PWCYP2SpGVDclKm8jeo175T3EVAkdKzzmfpxtMmnMlmq
cTJOU9TxuGvNASMtjj7pYIerTx+xgZDXEVBWFW9PjJ0TV06tCRsgSHItgg==
-----END CERTIFICATE-----`
	notifyVectorSerial    = "D7CE59D1F522D701"
	notifyVectorTimestamp = "1624523846"
	notifyVectorNonce     = "EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz"
	notifyVectorSignature = "tJHIiIS9eB2hAYstmAmbbD3ZE5LiIm/Ug5tuL4fC0YOFRWIHV39UFIZXC0e9Wl6lBu6sKvkqDkzpqzBsVHyXF" +
		"lbYZTOQrVdG4b6LfTnK4mikv9++ixJMd3vTf2yCqvBkh98zs3Ds5zsYQakzbcwhmw4fMJs4nPLws28H0UW9FjDR//rxELLwXvV1VEA1I" +
		"BLX70xptjL8hrfUjEE8kkry6yNJTHZRU8CAc7qHli2Ng1V1qb9ARbK8A3ThmFmPQvRGrapI/jS2laKKgYUmfdEdkNO6B2Cke5e8VTxY4" +
		"06ArAmQ90GAihDwIcb16TQMnzCMBoutnwZKNiKRACrFmtxw2Q=="
	notifyVectorBody = `{"id":"3119dfba-e649-5eec-ab1e-3412bc4d2e17","create_time":"2021-06-24T16:37:26+08:00",` +
		`"resource_type":"encrypt-resource","event_type":"PAYSCORE.USER_OPEN_SERVICE","summary":"签约成功",` +
		`"resource":{"original_type":"payscore","algorithm":"AEAD_AES_256_GCM","ciphertext":"YDS3lKPaC4Y52Gf3uhft5qUBlIa8b428AWTtTauHQfQrRw+X1WpiuHIDy0vo1Vd6VEq67aVyqPdDYMkRVSDaZL3iZt` +
		`tevRMOoPKMifozg6XPWjIZumks/GpT48lI4NizyeaqLBokNebthah3o1H76qSlO9NkDjp9bzmKLEYYH9TEklFUpsvPqOTOcgSLgh21YJXYR` +
		`7dEBXFgRLiNIKRgO5JdXh1hccRUAlyVWxE54PXpnQ==","associated_data":"payscore","nonce":"Kj7QIyUiYx1q"}}`
	notifyVectorKey       = "testMchAPIv3Key0"
	notifyVectorPlaintext = `{"mchid":"1234567890","appid":"054aa7d7a2a54ab5898df65bd96f001c",` +
		`"create_time":"2020-06-30T12:12:00+08:00","out_contract_code":"21640bdbd08e473e828f3206a2741c6e"}`
)

func TestWeChatPayPublishedNotification(t *testing.T) {
	ring := signature.NewKeyRing()
	serials, err := ring.AddCertificates(notifyVectorCert)
	require.NoError(t, err)
	require.Equal(t, []string{notifyVectorSerial}, serials, "the serial as Wechatpay-Serial names it")

	msg := []byte(notifyVectorTimestamp + "\n" + notifyVectorNonce + "\n" + notifyVectorBody + "\n")
	require.NoError(t, signature.VerifySHA256WithRSA(ring.Lookup(notifyVectorSerial), msg, notifyVectorSignature))
	require.ErrorIs(t, signature.VerifySHA256WithRSA(ring.Lookup(notifyVectorSerial), msg[:len(msg)-1], notifyVectorSignature),
		signature.ErrMismatch, "the message ends with a newline after the body")

	a, err := platform.NewAESGCM([]byte(notifyVectorKey))
	require.NoError(t, err)
	plain, err := a.Open("Kj7QIyUiYx1q", "payscore", "YDS3lKPaC4Y52Gf3uhft5qUBlIa8b428AWTtTauHQfQrRw+X1WpiuHIDy0vo1Vd6VEq67aVyqPdDYMkRVSDaZL3iZt"+
		"tevRMOoPKMifozg6XPWjIZumks/GpT48lI4NizyeaqLBokNebthah3o1H76qSlO9NkDjp9bzmKLEYYH9TEklFUpsvPqOTOcgSLgh21YJXYR"+
		"7dEBXFgRLiNIKRgO5JdXh1hccRUAlyVWxE54PXpnQ==")
	require.NoError(t, err)
	require.Equal(t, notifyVectorPlaintext, string(plain))

	// The preset with the vector's certificate: the headers, the window and
	// the signature hold (the published key is 16 bytes, so the preset's
	// 32-byte key cannot open the resource: a 400, not a 401).
	p, err := platform.New("wechatpay-v3", platform.Config{MchID: "1234567890", APIv3Key: "0123456789abcdef0123456789abcdef", Certificates: []string{notifyVectorCert}})
	require.NoError(t, err)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Wechatpay-Nonce", notifyVectorNonce)
	h.Set("Wechatpay-Timestamp", notifyVectorTimestamp)
	h.Set("Wechatpay-Serial", notifyVectorSerial)
	h.Set("Wechatpay-Signature", notifyVectorSignature)
	at := time.Unix(1624523846, 0)
	_, err = p.Read(platform.Request{Header: h, Body: []byte(notifyVectorBody), Now: at})
	require.ErrorContains(t, err, "resource: could not be decrypted")
	require.False(t, platform.IsUnauthenticated(err), "the published signature verifies")

	_, err = p.Read(platform.Request{Header: h, Body: []byte(notifyVectorBody + " "), Now: at})
	require.ErrorIs(t, err, signature.ErrMismatch, "one byte more in the body")
	_, err = p.Read(platform.Request{Header: h, Body: []byte(notifyVectorBody), Now: at.Add(5*time.Minute + time.Second)})
	require.ErrorIs(t, err, signature.ErrExpired)
	_, err = p.Read(platform.Request{Header: h, Body: []byte(notifyVectorBody), Now: at.Add(-5*time.Minute - time.Second)})
	require.ErrorIs(t, err, signature.ErrExpired)
	_, err = p.Read(platform.Request{Header: h, Body: []byte(notifyVectorBody), Now: at.Add(5 * time.Minute)})
	require.False(t, platform.IsUnauthenticated(err), "5 minutes is still inside the window")
}
