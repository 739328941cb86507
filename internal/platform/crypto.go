package platform

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
)

// AESGCM opens AEAD_AES_256_GCM (RFC 5116) resources the way WeChat Pay
// API v3 encrypts them: the key is used as raw bytes (the APIv3 key's 32
// ASCII characters), the nonce is the UTF-8 bytes of the nonce string (12),
// the associated data may be empty, and the ciphertext is the base64 of the
// encrypted data followed by the 16-byte tag. Safe for concurrent use.
type AESGCM struct {
	aead cipher.AEAD
}

// NewAESGCM prepares key: 32 bytes for AES-256 (16 and 24 are accepted by
// the building block; a preset says which length it requires).
func NewAESGCM(key []byte) (*AESGCM, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("an AES key is 16, 24 or 32 bytes, not %d", len(key))
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &AESGCM{aead: aead}, nil
}

// Errors of Open; their texts are safe to show the sender.
var (
	errGCMNonce      = errors.New("nonce must be 12 bytes")
	errGCMNotBase64  = errors.New("ciphertext is not standard base64")
	errGCMShort      = errors.New("ciphertext is shorter than its 16-byte tag")
	errGCMAuthFailed = errors.New("could not be decrypted (wrong key, nonce or associated data, or altered ciphertext)")
)

// Open decrypts and authenticates ciphertext (base64 of data||tag) with
// nonce and associatedData.
func (a *AESGCM) Open(nonce, associatedData, ciphertext string) ([]byte, error) {
	if len(nonce) != a.aead.NonceSize() {
		return nil, errGCMNonce
	}
	sealed, err := base64.StdEncoding.DecodeString(ciphertext)
	if err != nil {
		return nil, errGCMNotBase64
	}
	if len(sealed) < a.aead.Overhead() {
		return nil, errGCMShort
	}
	plain, err := a.aead.Open(sealed[:0], []byte(nonce), sealed, []byte(associatedData))
	if err != nil {
		return nil, errGCMAuthFailed
	}
	return plain, nil
}
