package platform_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/platform"
)

// The AES-GCM vector of wechatpay-go, WeChat Pay's official Go SDK
// (utils/aes_test.go; PLATFORMS.md section 2). Its key is 16 bytes, so
// this is AES-128-GCM: it checks the building block (nonce as UTF-8
// bytes, AAD, base64 of data||tag), while the wechatpay-v3 preset itself
// requires a 32-byte APIv3 key.
const (
	aesVectorKey        = "testAPIv3Key0000"
	aesVectorNonce      = "wCq51qZv4Yfg"
	aesVectorAAD        = "Dl56FrqWQJF1t9LtC3vEUsniZKvbqdR8"
	aesVectorCiphertext = "FsdXzxryWfKwvLJKf8LG/ToRPTRh8RN9wROC"
	aesVectorPlaintext  = "Hello World"
)

func TestAESGCMPublishedVector(t *testing.T) {
	a, err := platform.NewAESGCM([]byte(aesVectorKey))
	require.NoError(t, err)
	plain, err := a.Open(aesVectorNonce, aesVectorAAD, aesVectorCiphertext)
	require.NoError(t, err)
	require.Equal(t, aesVectorPlaintext, string(plain))

	wrong, err := platform.NewAESGCM([]byte("testAPIv3Key1111"))
	require.NoError(t, err)
	_, err = wrong.Open(aesVectorNonce, aesVectorAAD, aesVectorCiphertext)
	require.ErrorContains(t, err, "could not be decrypted", "wrong key")
	for name, c := range map[string][3]string{
		"wrong AAD":            {aesVectorNonce, "", aesVectorCiphertext},
		"wrong nonce":          {"wCq51qZv4Yfh", aesVectorAAD, aesVectorCiphertext},
		"altered ciphertext":   {aesVectorNonce, aesVectorAAD, "GsdXzxryWfKwvLJKf8LG/ToRPTRh8RN9wROC"},
		"not base64":           {aesVectorNonce, aesVectorAAD, "invalid cipher"},
		"no ciphertext":        {aesVectorNonce, aesVectorAAD, ""},
		"shorter than its tag": {aesVectorNonce, aesVectorAAD, "SGVsbG8gV29ybGQK"},
		"11-byte nonce":        {"wCq51qZv4Yf", aesVectorAAD, aesVectorCiphertext},
		"13-byte nonce":        {"wCq51qZv4Yfgg", aesVectorAAD, aesVectorCiphertext},
	} {
		_, err := a.Open(c[0], c[1], c[2])
		require.Error(t, err, name)
	}
	_, err = platform.NewAESGCM([]byte("not a aes key"))
	require.ErrorContains(t, err, "16, 24 or 32 bytes, not 13")
}
