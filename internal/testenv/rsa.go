package testenv

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

// RSAKeys are four RSA-2048 key pairs for the tests of the RSA signatures
// and presets (no platform publishes a usable key pair for Alipay; WeChat
// Pay's published vector has a 16-byte APIv3 key). Generated once per test
// binary: RSA-2048 generation is slow under -race.
var RSAKeys = sync.OnceValue(func() [4]*rsa.PrivateKey {
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

// RSAPublicKeyDER is k's public key as a DER SubjectPublicKeyInfo.
func RSAPublicKeyDER(k *rsa.PrivateKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		panic(err)
	}
	return der
}

// RSAPublicKeyPEM is k's public key as PEM "PUBLIC KEY".
func RSAPublicKeyPEM(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: RSAPublicKeyDER(k)}))
}

// RSACertificatePEM is a self-signed certificate of k with serial, like a
// WeChat Pay platform certificate.
func RSACertificatePEM(k *rsa.PrivateKey, serial *big.Int) string {
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "callgate test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// SignSHA256WithRSA is the base64 SHA256withRSA (PKCS#1 v1.5) signature of
// msg, as Alipay (RSA2) and WeChat Pay sign.
func SignSHA256WithRSA(k *rsa.PrivateKey, msg []byte) string {
	d := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}
