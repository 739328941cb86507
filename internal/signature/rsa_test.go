package signature_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
	"callgate/internal/testenv"
)

func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

func spki(t testing.TB, pub any) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return der
}

func TestParseRSAPublicKeyForms(t *testing.T) {
	key := testenv.RSAKeys()[0]
	b64 := base64.StdEncoding.EncodeToString(spki(t, &key.PublicKey))
	var lines []string
	for s := b64; s != ""; s = s[min(64, len(s)):] {
		lines = append(lines, s[:min(64, len(s))])
	}
	forms := map[string]string{
		"PEM PUBLIC KEY":          pemOf("PUBLIC KEY", spki(t, &key.PublicKey)),
		"PEM RSA PUBLIC KEY":      pemOf("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&key.PublicKey)),
		"PEM CERTIFICATE":         testenv.RSACertificatePEM(key, big.NewInt(7)),
		"bare base64 (console)":   b64,
		"base64 with line breaks": "\n" + strings.Join(lines, "\r\n") + "\n",
		"PEM with spaces around":  "  \n" + pemOf("PUBLIC KEY", spki(t, &key.PublicKey)) + "\n\n",
	}
	for name, s := range forms {
		pub, err := signature.ParseRSAPublicKey(s)
		require.NoError(t, err, name)
		require.True(t, pub.Equal(&key.PublicKey), name)
	}
}

func TestParseRSAPublicKeyRefuses(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	key := testenv.RSAKeys()[0]
	privDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	privPEM := pemOf("PRIVATE KEY", privDER)
	pubPEM := pemOf("PUBLIC KEY", spki(t, &key.PublicKey))
	cases := map[string]struct{ in, want string }{
		"1024-bit key":         {pemOf("PUBLIC KEY", spki(t, &small.PublicKey)), "1024 bits, fewer than 2048"},
		"1024-bit bare base64": {base64.StdEncoding.EncodeToString(spki(t, &small.PublicKey)), "fewer than 2048"},
		"EC key":               {pemOf("PUBLIC KEY", spki(t, &ec.PublicKey)), "not an RSA public key"},
		"private key":          {privPEM, "never a private key"},
		"RSA private key":      {pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), "never a private key"},
		"two keys in one":      {pubPEM + pubPEM, "more than one PEM block"},
		"broken PEM":           {"-----BEGIN PUBLIC KEY-----\nAAAA", "not well formed"},
		"PEM of garbage":       {pemOf("PUBLIC KEY", []byte("garbage")), "does not parse"},
		"other PEM type":       {pemOf("X509 CRL", []byte("x")), "is not PUBLIC KEY"},
		"not base64":           {"this is not a key!", "neither PEM nor base64"},
		"base64 of garbage":    {base64.StdEncoding.EncodeToString([]byte("garbage")), "not a public key"},
		"empty":                {"  \n", "empty"},
	}
	for name, c := range cases {
		_, err := signature.ParseRSAPublicKey(c.in)
		require.ErrorContains(t, err, c.want, name)
		require.NotContains(t, err.Error(), "MII", "%s: the error never repeats key material", name)
	}
}

func TestKeyRing(t *testing.T) {
	k := testenv.RSAKeys()
	ring := signature.NewKeyRing()
	require.NoError(t, ring.Add("PUB_KEY_ID_0114232134912410000000000000", &k[0].PublicKey))
	serials, err := ring.AddCertificates(testenv.RSACertificatePEM(k[1], new(big.Int).SetUint64(0xD7CE59D1F522D701)) + "\n" +
		testenv.RSACertificatePEM(k[2], new(big.Int).SetBytes([]byte{0x0A, 0x12, 0xBC})))
	require.NoError(t, err)
	require.Equal(t, []string{"D7CE59D1F522D701", "A12BC"}, serials, "upper-case hex, as Wechatpay-Serial carries it")
	require.Equal(t, 3, ring.Len())

	require.True(t, ring.Lookup("PUB_KEY_ID_0114232134912410000000000000").Equal(&k[0].PublicKey))
	require.True(t, ring.Lookup("pub_key_id_0114232134912410000000000000").Equal(&k[0].PublicKey), "case-insensitive")
	require.True(t, ring.Lookup("d7ce59d1f522d701").Equal(&k[1].PublicKey), "case-insensitive")
	require.True(t, ring.Lookup("0A12BC").Equal(&k[2].PublicKey), "a serial written with its leading zero")
	require.Nil(t, ring.Lookup("D7CE59D1F522D702"))
	require.Nil(t, ring.Lookup(""))

	require.NoError(t, ring.Add("D7CE59D1F522D701", &k[1].PublicKey), "the same key again is kept once")
	require.Equal(t, 3, ring.Len())
	require.ErrorContains(t, ring.Add("00d7ce59d1f522d701", &k[0].PublicKey), "given twice with different keys")

	_, err = ring.AddCertificates(pemOf("PUBLIC KEY", spki(t, &k[0].PublicKey)))
	require.ErrorContains(t, err, `certificate 1: PEM type "PUBLIC KEY" is not CERTIFICATE`)
	_, err = ring.AddCertificates(testenv.RSACertificatePEM(k[0], big.NewInt(9)) + "trailing garbage")
	require.ErrorContains(t, err, "certificate 2: not a PEM block")
	_, err = ring.AddCertificates("")
	require.ErrorContains(t, err, "no certificate")
}

func TestVerifySHA256WithRSA(t *testing.T) {
	k := testenv.RSAKeys()
	const msg = "1624523846\nnonce\n{\"id\":\"1\"}\n"
	sig := testenv.SignSHA256WithRSA(k[0], []byte(msg))
	require.NoError(t, signature.VerifySHA256WithRSA(&k[0].PublicKey, []byte(msg), sig))

	mismatch := map[string]error{
		"other message": signature.VerifySHA256WithRSA(&k[0].PublicKey, []byte(msg+" "), sig),
		"other key":     signature.VerifySHA256WithRSA(&k[1].PublicKey, []byte(msg), sig),
		"short":         signature.VerifySHA256WithRSA(&k[0].PublicKey, []byte(msg), sig[:40]),
		"empty":         signature.VerifySHA256WithRSA(&k[0].PublicKey, []byte(msg), ""),
	}
	for name, err := range mismatch {
		require.ErrorIs(t, err, signature.ErrMismatch, name)
	}
	malformed := map[string]error{
		"not base64":   signature.VerifySHA256WithRSA(&k[0].PublicKey, []byte(msg), "!!"+sig[2:]),
		"URL base64":   signature.VerifySHA256WithRSA(&k[0].PublicKey, []byte(msg), strings.NewReplacer("+", "-", "/", "_").Replace(sig)+"-_"),
		"huge":         signature.VerifySHA256WithRSA(&k[0].PublicKey, []byte(msg), strings.Repeat("A", 1<<20)),
		"one too long": signature.VerifySHA256WithRSA(&k[0].PublicKey, []byte(msg), sig+"AAAA"),
	}
	for name, err := range malformed {
		require.ErrorIs(t, err, signature.ErrMalformed, name)
	}

	ring := signature.NewKeyRing()
	require.ErrorIs(t, ring.VerifyAny([]byte(msg), sig), signature.ErrMismatch, "an empty ring verifies nothing")
	require.NoError(t, ring.Add("", &k[1].PublicKey))
	require.NoError(t, ring.Add("", &k[0].PublicKey))
	require.NoError(t, ring.VerifyAny([]byte(msg), sig), "during a rotation any key may have signed")
	require.NoError(t, ring.VerifyAny([]byte(msg), testenv.SignSHA256WithRSA(k[1], []byte(msg))))
	require.ErrorIs(t, ring.VerifyAny([]byte(msg), testenv.SignSHA256WithRSA(k[2], []byte(msg))), signature.ErrMismatch)
}

func FuzzParseRSAPublicKey(f *testing.F) {
	key := testenv.RSAKeys()[0]
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(f, err)
	f.Add(pemOf("PUBLIC KEY", der))
	f.Add(pemOf("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&key.PublicKey)))
	f.Add(testenv.RSACertificatePEM(key, big.NewInt(1)))
	f.Add(base64.StdEncoding.EncodeToString(der))
	f.Add(base64.StdEncoding.EncodeToString(der[:100]))
	f.Add("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := signature.ParseRSAPublicKey(s)
		if err != nil {
			require.Nil(t, pub)
			return
		}
		require.GreaterOrEqual(t, pub.N.BitLen(), signature.MinRSABits)
		ring := signature.NewKeyRing()
		require.NoError(t, ring.Add("x", pub))
		_, _ = ring.AddCertificates(s)
	})
}
