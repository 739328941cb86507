package platform_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"sync"
	"time"
)

// Key material the RSA presets' tests generate (no platform publishes a
// usable key pair for Alipay; WeChat Pay's published vector has a 16-byte
// APIv3 key). Generated once per test binary: RSA-2048 generation is slow
// under -race.
var rsaTestKeys = sync.OnceValue(func() [4]*rsa.PrivateKey {
	var out [4]*rsa.PrivateKey
	for i := range out {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		out[i] = k
	}
	return out
})

// spkiDER is the DER SubjectPublicKeyInfo of k's public key.
func spkiDER(k *rsa.PrivateKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		panic(err)
	}
	return der
}

// bareBase64 is k's public key as the Alipay console shows it.
func bareBase64(k *rsa.PrivateKey) string { return base64.StdEncoding.EncodeToString(spkiDER(k)) }

// publicPEM is k's public key as PEM "PUBLIC KEY".
func publicPEM(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spkiDER(k)}))
}

// certPEM is a self-signed certificate of k with serial, like a WeChat Pay
// platform certificate.
func certPEM(k *rsa.PrivateKey, serial *big.Int) string {
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "Tenpay.com Root CA (test)"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// signRSA2 is the base64 SHA256withRSA (PKCS#1 v1.5) signature of msg.
func signRSA2(k *rsa.PrivateKey, msg []byte) string {
	d := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}
