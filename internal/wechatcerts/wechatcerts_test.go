package wechatcerts_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/platform"
	"callgate/internal/source"
	"callgate/internal/testenv"
	"callgate/internal/wechatcerts"
	"callgate/test/platformsim"
)

const (
	mchID     = "1230000109"
	mchSerial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
	apiv3Key  = "callgate0test0apiv3key0032bytes!"
)

var (
	serialA = new(big.Int).SetUint64(0x5157F09EFDC096DE)
	serialB = new(big.Int).SetUint64(0x7A2B0C3D4E5F6071)
)

// setup is a wechatpay-v3 preset trusting certificate A (test key 0), a
// simulator signing as A and listing A, and the refresher between them
// (the merchant: test key 1).
func setup(t *testing.T) (platform.PlatformCertificates, *platformsim.WeChatPay, *wechatcerts.Refresher, string) {
	t.Helper()
	keys := testenv.RSAKeys()
	now := time.Now()
	certA := platformsim.WeChatPayCertificate(keys[0], serialA, now.Add(-time.Hour), now.Add(24*time.Hour))
	p, err := platform.New("wechatpay-v3", platform.Config{MchID: mchID, APIv3Key: apiv3Key, Certificates: []string{certA}})
	require.NoError(t, err)
	certs := p.(platform.PlatformCertificates)
	require.True(t, certs.UsesCertificates())
	sim := platformsim.StartWeChatPay(t, mchID, mchSerial, &keys[1].PublicKey, keys[0], "5157F09EFDC096DE")
	sim.SetCertificates(apiv3Key, certA)
	keyFile := filepath.Join(t.TempDir(), "apiclient_key.pem")
	der, err := x509.MarshalPKCS8PrivateKey(keys[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	s := source.Config{Name: "wechatpay", Preset: "wechatpay-v3",
		Platform:  platform.Config{MchID: mchID, APIv3Key: apiv3Key, Certificates: []string{certA}},
		Reconcile: source.Reconcile{PrivateKeyFile: keyFile, Serial: mchSerial, APIBase: sim.URL}}
	r, err := wechatcerts.New(t.Context(), s, certs, nil)
	require.NoError(t, err)
	require.Equal(t, wechatcerts.DefaultInterval, r.Interval, "twice a day")
	return certs, sim, r, certA
}

func outcome(t *testing.T, err error) string {
	t.Helper()
	var e *wechatcerts.Error
	require.True(t, errors.As(err, &e), "%v", err)
	return e.Outcome
}

// TestRefreshTrustsOnlyHeldKeys: an answer is believed only signed by a
// key already held, never by a certificate it lists itself (no trust on
// first use: a source in certificates mode always has a configured one).
func TestRefreshTrustsOnlyHeldKeys(t *testing.T) {
	keys := testenv.RSAKeys()
	certs, sim, r, certA := setup(t)
	now := time.Now()
	certB := platformsim.WeChatPayCertificate(keys[3], serialB, now.Add(-time.Hour), now.Add(24*time.Hour))
	sim.SignAs(keys[3], "7A2B0C3D4E5F6071")
	sim.SetCertificates(apiv3Key, certA, certB)
	require.Equal(t, wechatcerts.OutcomeBadSignature, outcome(t, r.Refresh(t.Context())), "B vouching for itself")
	require.Equal(t, []string{"5157F09EFDC096DE"}, certs.HeldCertificates(now))

	sim.SignAs(keys[0], "5157F09EFDC096DE")
	require.NoError(t, r.Refresh(t.Context()))
	require.Equal(t, []string{"5157F09EFDC096DE", "7A2B0C3D4E5F6071"}, certs.HeldCertificates(time.Now()))
	require.NoError(t, certs.VerifyAnswer("7A2B0C3D4E5F6071", "m", testenv.SignSHA256WithRSA(keys[3], []byte("m"))),
		"the query answers are verified with the renewed set too")
	require.Equal(t, 2, sim.CertificateDownloads())
	require.Zero(t, sim.Refusals())
}

// TestRefreshFailuresKeepTheHeld: an answer that does not decrypt with
// the APIv3 key, lists only expired certificates or nothing, a refused
// request (the merchant's signature) and WeChat Pay down change nothing.
func TestRefreshFailuresKeepTheHeld(t *testing.T) {
	keys := testenv.RSAKeys()
	certs, sim, r, certA := setup(t)
	now := time.Now()
	certB := platformsim.WeChatPayCertificate(keys[3], serialB, now.Add(-time.Hour), now.Add(24*time.Hour))
	require.NoError(t, r.Refresh(t.Context()))
	sim.SetCertificates(apiv3Key, certA, certB)
	require.NoError(t, r.Refresh(t.Context()))
	held := []string{"5157F09EFDC096DE", "7A2B0C3D4E5F6071"}
	require.Equal(t, held, certs.HeldCertificates(time.Now()))

	expired := platformsim.WeChatPayCertificate(keys[2], big.NewInt(0xE0), now.Add(-48*time.Hour), now.Add(-time.Hour))
	for name, c := range map[string]struct {
		edit    func()
		outcome string
		reason  string
	}{
		"another APIv3 key": {func() { sim.SetCertificates(strings.Repeat("k", 32), certB) }, wechatcerts.OutcomeInvalid, "does not decrypt"},
		"all expired":       {func() { sim.SetCertificates(apiv3Key, expired) }, wechatcerts.OutcomeInvalid, "expired"},
		"none listed":       {func() { sim.SetCertificates(apiv3Key) }, wechatcerts.OutcomeInvalid, "no certificate"},
		"down":              {func() { sim.Down(true) }, wechatcerts.OutcomeUnreachable, ""},
	} {
		c.edit()
		err := r.Refresh(t.Context())
		require.Equal(t, c.outcome, outcome(t, err), name)
		require.ErrorContains(t, err, c.reason, name)
		require.Equal(t, held, certs.HeldCertificates(time.Now()), name)
		sim.Down(false)
	}

	// The merchant's signature refused (another merchant serial).
	s := source.Config{Name: "wechatpay", Preset: "wechatpay-v3",
		Platform:  platform.Config{MchID: mchID, APIv3Key: apiv3Key},
		Reconcile: source.Reconcile{PrivateKeyFile: writeKey(t), Serial: "0000", APIBase: sim.URL}}
	other, err := wechatcerts.New(t.Context(), s, certs, nil)
	require.NoError(t, err)
	sim.SetCertificates(apiv3Key, certA)
	err = other.Refresh(t.Context())
	require.Equal(t, wechatcerts.OutcomeRefused, outcome(t, err))
	require.ErrorContains(t, err, "SIGN_ERROR")
	require.Equal(t, held, certs.HeldCertificates(time.Now()))
}

func writeKey(t *testing.T) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(testenv.RSAKeys()[1])
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "k.pem")
	require.NoError(t, os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	return f
}

// TestNewNeedsCredentials: without the merchant's key, or with one that
// does not read, nothing is built, and the field is named.
func TestNewNeedsCredentials(t *testing.T) {
	_, err := wechatcerts.New(t.Context(), source.Config{Platform: platform.Config{MchID: mchID}}, nil, nil)
	require.ErrorContains(t, err, "reconcile.private_key_file")
	bad := filepath.Join(t.TempDir(), "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a key"), 0o600))
	_, err = wechatcerts.New(t.Context(), source.Config{Platform: platform.Config{MchID: mchID},
		Reconcile: source.Reconcile{PrivateKeyFile: bad, Serial: mchSerial}}, nil, nil)
	require.ErrorContains(t, err, "WECHATPAY_MCH_PRIVATE_KEY_FILE")
}
