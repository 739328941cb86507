package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/testenv"
)

// TestTLS: with tls_cert_file and tls_key_file the gateway serves HTTPS.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))

	cfg := testenv.Config(t, func(c *config.Config) {
		c.HTTP.TLSCertFile, c.HTTP.TLSKeyFile = certFile, keyFile
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gw := testenv.StartGatewayOn(t, cfg, ln, "https")

	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	body := testenv.PaymentBody("ORD-TLS", "PAY-TLS", 1)
	req, err := http.NewRequest("POST", gw.URL+"/callbacks/paydemo", strings.NewReader(string(body)))
	require.NoError(t, err)
	for k, v := range testenv.PaydemoHeaders(t, cfg, "msg_tls", time.Now(), body) {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS, "served over TLS")

	plain, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	plain.Body.Close()
	require.Equal(t, http.StatusBadRequest, plain.StatusCode, "plain HTTP to the TLS port is refused")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
