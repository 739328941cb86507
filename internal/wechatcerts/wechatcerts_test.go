package wechatcerts_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// TestRefreshBelievesTheAPIv3Key: an answer is believed when its
// certificates decrypt with the APIv3 key and it is signed by one of them
// or by a key held, as WeChat Pay's SDK believes it: a certificate that
// already signs (the switch done while no process ran) is taken from the
// first download. Certificates sealed with another key, or an answer
// signed by a key neither held nor listed, are refused.
func TestRefreshBelievesTheAPIv3Key(t *testing.T) {
	keys := testenv.RSAKeys()
	certs, sim, r, certA := setup(t)
	now := time.Now()
	certB := platformsim.WeChatPayCertificate(keys[3], serialB, now.Add(-time.Hour), now.Add(24*time.Hour))
	sim.SignAs(keys[3], "7A2B0C3D4E5F6071")
	sim.SetCertificates(strings.Repeat("k", 32), certA, certB)
	require.Equal(t, wechatcerts.OutcomeInvalid, outcome(t, r.Refresh(t.Context())), "B not sealed with the merchant's APIv3 key")
	require.Equal(t, []string{"5157F09EFDC096DE"}, certs.HeldCertificates(now))

	sim.SetCertificates(apiv3Key, certA, certB)
	require.NoError(t, r.Refresh(t.Context()), "B signing, listed and sealed with the APIv3 key")
	require.Equal(t, []string{"5157F09EFDC096DE", "7A2B0C3D4E5F6071"}, certs.HeldCertificates(time.Now()))
	require.NoError(t, certs.VerifyAnswer("7A2B0C3D4E5F6071", "m", testenv.SignSHA256WithRSA(keys[3], []byte("m"))),
		"the query answers are verified with the renewed set too")

	// Signed by a key neither held nor listed, under B's serial or its own.
	sim.SignWith(keys[2])
	require.Equal(t, wechatcerts.OutcomeBadSignature, outcome(t, r.Refresh(t.Context())))
	sim.SignWith(nil)
	sim.SignAs(keys[2], "0E0E0E0E")
	require.Equal(t, wechatcerts.OutcomeBadSignature, outcome(t, r.Refresh(t.Context())))
	require.Equal(t, []string{"5157F09EFDC096DE", "7A2B0C3D4E5F6071"}, certs.HeldCertificates(time.Now()))
	require.Equal(t, 4, sim.CertificateDownloads())
	require.Zero(t, sim.Refusals())
}

// TestStoredCertificatesAreShared: what one process's download believed
// is stored (MySQL), and another process, started while WeChat Pay
// cannot be reached, holds it from its start; a download that fails
// there takes what was stored since; a later download's list replaces the
// stored one.
func TestStoredCertificatesAreShared(t *testing.T) {
	keys := testenv.RSAKeys()
	st := testenv.Store(t, testenv.Config(t))
	_, sim, first, certA := setup(t)
	first.Store = st
	now := time.Now()
	certB := platformsim.WeChatPayCertificate(keys[3], serialB, now.Add(-time.Hour), now.Add(24*time.Hour))
	sim.SignAs(keys[3], "7A2B0C3D4E5F6071")
	sim.SetCertificates(apiv3Key, certB)
	require.NoError(t, first.Refresh(t.Context()))
	rows, err := st.WeChatPayCertificates(t.Context(), mchID, time.Now())
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "7A2B0C3D4E5F6071", rows[0].Serial)
	require.Equal(t, certB, rows[0].PEM)

	// The second process: configured with A only, WeChat Pay down.
	sim.Down(true)
	second, secondCerts := newRefresher(t, sim.URL, certA, st)
	second.LoadStored(t.Context())
	require.Equal(t, []string{"5157F09EFDC096DE", "7A2B0C3D4E5F6071"}, secondCerts.HeldCertificates(time.Now()))
	require.NoError(t, secondCerts.VerifyAnswer("7A2B0C3D4E5F6071", "m", testenv.SignSHA256WithRSA(keys[3], []byte("m"))))
	require.Equal(t, wechatcerts.OutcomeUnreachable, outcome(t, second.Refresh(t.Context())))
	require.Equal(t, []string{"5157F09EFDC096DE", "7A2B0C3D4E5F6071"}, secondCerts.HeldCertificates(time.Now()))

	// WeChat Pay lists C instead of B: the first process stores it; the
	// second, still cut off, takes it at its next try.
	serialC := new(big.Int).SetUint64(0x3C0FFEE0C0FFEE03)
	certC := platformsim.WeChatPayCertificate(keys[2], serialC, now.Add(-time.Hour), now.Add(48*time.Hour))
	sim.Down(false)
	sim.SetCertificates(apiv3Key, certC)
	sim.SignAs(keys[2], "3C0FFEE0C0FFEE03")
	require.NoError(t, first.Refresh(t.Context()))
	rows, err = st.WeChatPayCertificates(t.Context(), mchID, time.Now())
	require.NoError(t, err)
	require.Len(t, rows, 1, "B is no longer listed: no longer stored")
	require.Equal(t, "3C0FFEE0C0FFEE03", rows[0].Serial)
	sim.Down(true)
	require.Equal(t, wechatcerts.OutcomeUnreachable, outcome(t, second.Refresh(t.Context())))
	require.Equal(t, []string{"5157F09EFDC096DE", "7A2B0C3D4E5F6071", "3C0FFEE0C0FFEE03"}, secondCerts.HeldCertificates(time.Now()),
		"a failed download keeps what it held, and adds what was stored since")
	sim.Down(false)
	require.NoError(t, second.Refresh(t.Context()))
	require.Equal(t, []string{"5157F09EFDC096DE", "3C0FFEE0C0FFEE03"}, secondCerts.HeldCertificates(time.Now()))
}

// newRefresher is another process's refresher: its own preset, configured
// with certificate cert, against the simulator at url, storing in st.
func newRefresher(t *testing.T, url, cert string, st wechatcerts.Store) (*wechatcerts.Refresher, platform.PlatformCertificates) {
	t.Helper()
	p, err := platform.New("wechatpay-v3", platform.Config{MchID: mchID, APIv3Key: apiv3Key, Certificates: []string{cert}})
	require.NoError(t, err)
	certs := p.(platform.PlatformCertificates)
	s := source.Config{Name: "wechatpay", Preset: "wechatpay-v3",
		Platform:  platform.Config{MchID: mchID, APIv3Key: apiv3Key, Certificates: []string{cert}},
		Reconcile: source.Reconcile{PrivateKeyFile: writeKey(t), Serial: mchSerial, APIBase: url}}
	r, err := wechatcerts.New(t.Context(), s, certs, nil)
	require.NoError(t, err)
	r.Store = st
	return r, certs
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

// TestDownloadFollowsNoRedirectAndReadsNoOversizeAnswer: the download is
// callgate's outbound client: a 307 to another address is not followed
// (the address is never asked) and a 2 MiB answer is not read; both are
// unreachable, and the certificates held stay.
func TestDownloadFollowsNoRedirectAndReadsNoOversizeAnswer(t *testing.T) {
	certs, sim, r, _ := setup(t)
	require.NoError(t, r.Refresh(t.Context()))
	held := certs.HeldCertificates(time.Now())
	var came atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { came.Add(1) }))
	defer elsewhere.Close()
	for _, m := range []struct {
		m      platformsim.Misbehaviour
		reason string
	}{
		{platformsim.Misbehaviour{RedirectTo: elsewhere.URL}, "redirect"},
		{platformsim.Misbehaviour{Oversize: 2 << 20}, "longer than callgate reads"},
	} {
		sim.Misbehave(m.m)
		err := r.Refresh(t.Context())
		require.Equal(t, wechatcerts.OutcomeUnreachable, outcome(t, err), m.reason)
		require.ErrorContains(t, err, m.reason)
		require.Equal(t, held, certs.HeldCertificates(time.Now()))
	}
	require.Zero(t, came.Load(), "the redirect was followed")

	// An http base to anything but a loopback address is refused.
	s := source.Config{Name: "wechatpay", Preset: "wechatpay-v3", Platform: platform.Config{MchID: mchID, APIv3Key: apiv3Key},
		Reconcile: source.Reconcile{PrivateKeyFile: writeKey(t), Serial: mchSerial, APIBase: "http://api.mch.weixin.qq.com"}}
	_, err := wechatcerts.New(t.Context(), s, certs, nil)
	require.ErrorContains(t, err, "https only")
}
