package platformsim

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"time"
)

// certificatesPath is WeChat Pay's platform certificates download
// (GET /v3/certificates): signed by the merchant like a query; the answer
// lists each platform certificate, encrypted with the APIv3 key
// (AEAD_AES_256_GCM, associated data "certificate", a 12-character nonce),
// and is signed like every answer, Wechatpay-Serial naming the signing
// certificate (SignAs).
const certificatesPath = "/v3/certificates"

// WeChatPayCertificate is a self-signed platform certificate of k with
// serial, valid from notBefore to notAfter, as PEM.
func WeChatPayCertificate(k *rsa.PrivateKey, serial *big.Int, notBefore, notAfter time.Time) string {
	tmpl := &x509.Certificate{SerialNumber: serial,
		Subject:   pkix.Name{CommonName: "Tenpay.com Root CA test", Organization: []string{"Tenpay.com"}},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// SetCertificates makes GET /v3/certificates list certs (PEM
// certificates), encrypted with apiv3Key.
func (s *WeChatPay) SetCertificates(apiv3Key string, certs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiv3Key, s.certs = apiv3Key, append([]string(nil), certs...)
}

// SignAs signs every answer from now on with k, naming it serial in
// Wechatpay-Serial (a platform certificate's serial, or a public key id):
// WeChat Pay switching to another certificate.
func (s *WeChatPay) SignAs(k *rsa.PrivateKey, serial string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.platform, s.keyID = k, serial
}

// CertificateDownloads is how many signed GET /v3/certificates came.
func (s *WeChatPay) CertificateDownloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

func (s *WeChatPay) serveCertificates(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.answer(w, http.StatusNotFound, map[string]any{"code": "NOT_FOUND", "message": "no such API"})
		return
	}
	if err := s.checkAuthorization(r); err != nil {
		s.refused()
		s.answer(w, http.StatusUnauthorized, map[string]any{"code": "SIGN_ERROR", "message": err.Error()})
		return
	}
	s.mu.Lock()
	s.downloads++
	key, certs := s.apiv3Key, s.certs
	s.mu.Unlock()
	data := []map[string]any{}
	for _, p := range certs {
		block, _ := pem.Decode([]byte(p))
		if block == nil {
			panic("platformsim: SetCertificates takes PEM certificates")
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			panic(err)
		}
		ct, nonce := sealGCM(key, p, "certificate")
		data = append(data, map[string]any{
			"serial_no":      strings.ToUpper(c.SerialNumber.Text(16)),
			"effective_time": c.NotBefore.In(shanghai).Format(time.RFC3339),
			"expire_time":    c.NotAfter.In(shanghai).Format(time.RFC3339),
			"encrypt_certificate": map[string]string{"algorithm": "AEAD_AES_256_GCM", "nonce": nonce,
				"associated_data": "certificate", "ciphertext": ct},
		})
	}
	s.answer(w, http.StatusOK, map[string]any{"data": data})
}

// shanghai is the +08:00 WeChat Pay writes its times in.
var shanghai = time.FixedZone("CST", 8*3600)

// sealGCM encrypts plaintext as WeChat Pay does: AES-256-GCM keyed with
// the APIv3 key, a 12-character nonce, base64 of ciphertext||tag.
func sealGCM(key, plaintext, aad string) (ciphertext, nonce string) {
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
