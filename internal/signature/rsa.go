package signature

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// SHA256withRSA (RSASSA-PKCS1-v1_5 over SHA-256) with platform public keys,
// as Alipay (sign_type RSA2) and WeChat Pay API v3 sign their
// notifications. The platform preset builds the signed message; this file
// owns the keys: parsing them from the forms consoles hand out, the minimum
// size, the ring that names them (WeChat Pay's Wechatpay-Serial), and the
// verification with errors wrapping this package's sentinels.

// MinRSABits is the smallest RSA key accepted: both Alipay (RSA2) and
// WeChat Pay use 2048-bit keys, and shorter ones are breakable.
const MinRSABits = 2048

// ParseRSAPublicKey reads an RSA public key given as PEM ("PUBLIC KEY",
// "RSA PUBLIC KEY", or a "CERTIFICATE", whose key is taken) or as the bare
// base64 DER SubjectPublicKeyInfo that the Alipay console shows (line
// breaks and spaces inside it are ignored). Keys shorter than MinRSABits
// are refused. Errors never repeat the input.
func ParseRSAPublicKey(s string) (*rsa.PublicKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("the key is empty")
	}
	var pub any
	if strings.HasPrefix(s, "-----BEGIN") {
		block, rest := pem.Decode([]byte(s))
		if block == nil {
			return nil, errors.New("the PEM block is not well formed")
		}
		if len(bytes.TrimSpace(rest)) != 0 {
			return nil, errors.New("more than one PEM block: give one key per entry")
		}
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				pub = cert.PublicKey
			}
		default:
			if strings.Contains(block.Type, "PRIVATE") {
				return nil, fmt.Errorf("this is a %s: give the platform's public key, never a private key", block.Type)
			}
			return nil, fmt.Errorf("PEM type %q is not PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("the %s does not parse", block.Type)
		}
	} else {
		der, err := base64.StdEncoding.DecodeString(stripSpace(s))
		if err != nil {
			return nil, errors.New("neither PEM nor base64 DER")
		}
		if pub, err = x509.ParsePKIXPublicKey(der); err != nil {
			if pub, err = x509.ParsePKCS1PublicKey(der); err != nil {
				return nil, errors.New("the base64 DER is not a public key (SubjectPublicKeyInfo)")
			}
		}
	}
	return checkRSA(pub)
}

// checkRSA accepts an RSA public key of at least MinRSABits.
func checkRSA(pub any) (*rsa.PublicKey, error) {
	k, ok := pub.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T is not an RSA public key", pub)
	}
	if bits := k.N.BitLen(); bits < MinRSABits {
		return nil, fmt.Errorf("the RSA key has %d bits, fewer than %d", bits, MinRSABits)
	}
	return k, nil
}

// stripSpace removes every ASCII space, tab and line break.
func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
			return -1
		}
		return r
	}, s)
}

// CertificateSerial is a certificate's serial number as WeChat Pay sends it
// in Wechatpay-Serial: upper-case hex, e.g. "D7CE59D1F522D701".
func CertificateSerial(cert *x509.Certificate) string {
	return strings.ToUpper(cert.SerialNumber.Text(16))
}

// KeyRing is a set of RSA public keys, each under an id (a key id such as
// WeChat Pay's PUB_KEY_ID_..., or a certificate serial). Ids compare
// case-insensitively, and an id made of hex digits ignores leading zeros
// (a serial may be written "0A12..." or "A12..."). Build it with Add and
// AddCertificates, then only read it: reading is safe for concurrent use.
type KeyRing struct {
	byID map[string]*rsa.PublicKey
	keys []*rsa.PublicKey
	ids  []string
}

// NewKeyRing returns an empty ring.
func NewKeyRing() *KeyRing { return &KeyRing{byID: map[string]*rsa.PublicKey{}} }

// normalizeID is the lookup form of an id.
func normalizeID(id string) string {
	id = strings.ToUpper(strings.TrimSpace(id))
	hex := id != ""
	for i := 0; i < len(id) && hex; i++ {
		c := id[i]
		hex = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F')
	}
	if hex {
		if t := strings.TrimLeft(id, "0"); t != "" {
			return t
		}
		return "0"
	}
	return id
}

// Add puts pub under id (which may be "" for a key that has no name, such
// as an Alipay public key: it then verifies only through VerifyAny). The
// same key under the same id twice is kept once; another key under a known
// id is refused.
func (r *KeyRing) Add(id string, pub *rsa.PublicKey) error {
	if _, err := checkRSA(pub); err != nil {
		return err
	}
	if id != "" {
		n := normalizeID(id)
		if old, ok := r.byID[n]; ok {
			if old.Equal(pub) {
				return nil
			}
			return fmt.Errorf("key id %s is given twice with different keys", id)
		}
		r.byID[n] = pub
		r.ids = append(r.ids, id)
	}
	r.keys = append(r.keys, pub)
	return nil
}

// AddCertificates parses a PEM bundle of one or more certificates and adds
// each one's public key under its serial (CertificateSerial). It returns
// the serials added. Anything in the bundle that is not a certificate is
// refused.
func (r *KeyRing) AddCertificates(bundle string) ([]string, error) {
	rest := []byte(strings.TrimSpace(bundle))
	var serials []string
	for n := 1; len(bytes.TrimSpace(rest)) > 0; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fmt.Errorf("certificate %d: not a PEM block", n)
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("certificate %d: PEM type %q is not CERTIFICATE", n, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse", n)
		}
		pub, err := checkRSA(cert.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n, err)
		}
		serial := CertificateSerial(cert)
		if err := r.Add(serial, pub); err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n, err)
		}
		serials = append(serials, serial)
	}
	if len(serials) == 0 {
		return nil, errors.New("the bundle holds no certificate")
	}
	return serials, nil
}

// Lookup returns the key under id, or nil.
func (r *KeyRing) Lookup(id string) *rsa.PublicKey { return r.byID[normalizeID(id)] }

// Len is the number of keys.
func (r *KeyRing) Len() int { return len(r.keys) }

// IDs lists the ids of the named keys, as they were added.
func (r *KeyRing) IDs() []string { return append([]string(nil), r.ids...) }

// VerifyAny verifies a base64 SHA256withRSA signature of message against
// every key of the ring (a rotation: any may have signed).
func (r *KeyRing) VerifyAny(message []byte, base64Signature string) error {
	return verifySHA256WithRSA(r.keys, message, base64Signature)
}

// VerifySHA256WithRSA verifies the standard base64 RSASSA-PKCS1-v1_5
// SHA-256 signature of message with pub. An undecodable signature wraps
// ErrMalformed, a wrong one ErrMismatch.
func VerifySHA256WithRSA(pub *rsa.PublicKey, message []byte, base64Signature string) error {
	return verifySHA256WithRSA([]*rsa.PublicKey{pub}, message, base64Signature)
}

var (
	errRSANotBase64 = fmt.Errorf("the signature is not standard base64: %w", ErrMalformed)
	errRSATooLong   = fmt.Errorf("the signature is longer than an RSA signature: %w", ErrMalformed)
	errRSAMismatch  = fmt.Errorf("SHA256withRSA: %w", ErrMismatch)
	errRSANoKey     = fmt.Errorf("no public key to verify with: %w", ErrMismatch)
)

func verifySHA256WithRSA(keys []*rsa.PublicKey, message []byte, b64 string) error {
	if len(keys) == 0 {
		return errRSANoKey
	}
	size := 0
	for _, k := range keys {
		size = max(size, k.Size())
	}
	// Refuse before decoding: a signature is exactly one key size long.
	if len(b64) > base64.StdEncoding.EncodedLen(size) {
		return errRSATooLong
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return errRSANotBase64
	}
	digest := sha256.Sum256(message)
	for _, k := range keys {
		if len(sig) == k.Size() && rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) == nil {
			return nil
		}
	}
	return errRSAMismatch
}
