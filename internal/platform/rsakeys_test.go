package platform_test

import (
	"crypto/rsa"
	"encoding/base64"

	"callgate/internal/testenv"
)

// bareBase64 is k's public key as the Alipay console shows it. The other
// RSA key material is testenv's (internal/testenv/rsa.go).
func bareBase64(k *rsa.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(testenv.RSAPublicKeyDER(k))
}
