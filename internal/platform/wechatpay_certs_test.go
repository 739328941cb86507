package platform_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/metrics"
	"callgate/internal/platform"
	"callgate/internal/testenv"
	"callgate/internal/worker"
	"callgate/test/platformsim"
)

// wechatCerts is a gateway and a worker with the wechatpay source in
// platform certificates mode (certificate A, test key 0, configured), its
// merchant credentials set (test key 1), and WeChat Pay's
// /v3/certificates simulated, downloaded every 200 ms.
type wechatCerts struct {
	*testenv.Platform
	sim *platformsim.WeChatPay
}

var wechatSerialC = new(big.Int).SetUint64(0x3C0FFEE0C0FFEE03)

func hexSerial(n *big.Int) string { return strings.ToUpper(n.Text(16)) }

func startWeChatCerts(t *testing.T, certA string) *wechatCerts {
	t.Helper()
	sim := startWeChatCertsSim(t, certA)
	cfg := platform.Config{MchID: wechatMchID, APIv3Key: wechatAPIv3Key, Certificates: []string{certA}}
	p := testenv.StartPlatform(t, "wechatpay", cfg, wechatMerchant(t, sim))
	return &wechatCerts{Platform: p, sim: sim}
}

// startWeChatCertsSim is WeChat Pay signing as certificate A (test key 0)
// and listing certA; the merchant's API key is test key 1.
func startWeChatCertsSim(t *testing.T, certA string) *platformsim.WeChatPay {
	t.Helper()
	keys := testenv.RSAKeys()
	sim := platformsim.StartWeChatPay(t, wechatMchID, wechatMchSerial, &keys[1].PublicKey, keys[0], hexSerial(wechatSerialA))
	sim.SetCertificates(wechatAPIv3Key, certA)
	return sim
}

// wechatMerchant gives the wechatpay source the merchant's credentials
// (test key 1) against sim, downloading every 200 ms.
func wechatMerchant(t *testing.T, sim *platformsim.WeChatPay) func(*config.Config) {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "apiclient_key.pem")
	der, err := x509.MarshalPKCS8PrivateKey(testenv.RSAKeys()[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	return func(c *config.Config) {
		for i := range c.Sources {
			if c.Sources[i].Name == "wechatpay" {
				c.Sources[i].Reconcile.PrivateKeyFile = keyFile
				c.Sources[i].Reconcile.Serial = wechatMchSerial
				c.Sources[i].Reconcile.APIBase = sim.URL
				c.Sources[i].Reconcile.CertificatesRefresh = 200 * time.Millisecond
			}
		}
	}
}

// metric reads one series of the gateway's /metrics (0 when absent).
func (w *wechatCerts) metric(t *testing.T, name, labels string) int {
	t.Helper()
	resp, err := http.Get(w.GW.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\d+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

func (w *wechatCerts) refreshes(t *testing.T, outcome string) int {
	return w.metric(t, "callgate_wechatpay_certificates_refresh_total", `outcome="`+outcome+`",process="gateway",source="wechatpay"`)
}

func (w *wechatCerts) held(t *testing.T) int {
	return w.metric(t, "callgate_wechatpay_certificates_held", `process="gateway",source="wechatpay"`)
}

// afterRefreshes waits until the gateway counted two more downloads of
// outcome than now: at least one of them started after the caller's
// change to the simulator.
func (w *wechatCerts) afterRefreshes(t *testing.T, outcome string) {
	t.Helper()
	n := w.refreshes(t, outcome)
	require.Eventually(t, func() bool { return w.refreshes(t, outcome) >= n+2 }, 15*time.Second, 20*time.Millisecond,
		"downloads of outcome %s", outcome)
}

// notify posts a paid notification of a new order, signed with k as serial.
func (w *wechatCerts) notify(t *testing.T, id string, k *rsa.PrivateKey, serial string) testenv.RawAnswer {
	t.Helper()
	order := "WX-CERT-" + id
	w.CreateOrder(t, order, 100, "CNY")
	body := wechatPaid(id, order, "42000000012026120300"+id, "SUCCESS", 100)
	return w.Post(t, "wechatpay", body, wechatSigned(k, serial, body, time.Now()))
}

func (w *wechatCerts) accepted(t *testing.T, id string, k *rsa.PrivateKey, serial string) {
	t.Helper()
	a := w.notify(t, id, k, serial)
	require.Equal(t, http.StatusNoContent, a.Status, "%s signed as %s: %s", id, serial, a.Body)
	row := w.Settled(t, "wechatpay", id)
	require.Equal(t, "WX-CERT-"+id, row.BusinessKey)
	require.Contains(t, string(row.Headers), serial)
}

func (w *wechatCerts) refused(t *testing.T, id string, k *rsa.PrivateKey, serial string) {
	t.Helper()
	before := w.Callbacks(t, "wechatpay")
	msg := requireWeChatRefusal(t, w.notify(t, id, k, serial), http.StatusUnauthorized, id)
	require.Contains(t, msg, serial, "the refusal names the serial")
	require.Equal(t, before, w.Callbacks(t, "wechatpay"), "%s: nothing stored", id)
}

func newRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

// TestWeChatPayPlatformCertificatesRenew: a source configured with
// platform certificate A only downloads /v3/certificates at start and
// every interval. When WeChat Pay lists a new certificate B, a
// notification signed with B, refused before, is accepted after the next
// download; when A is gone and B signs the downloads, B's own earlier
// download verifies them; an expired certificate is never held, and one
// that expires while held is refused from its expiry on. A download with
// a bad signature (listing an attacker's certificate), or WeChat Pay
// down, keeps the certificates held and is counted.
func TestWeChatPayPlatformCertificatesRenew(t *testing.T) {
	keys := testenv.RSAKeys()
	now := time.Now()
	certA := platformsim.WeChatPayCertificate(keys[0], wechatSerialA, now.Add(-time.Hour), now.Add(24*time.Hour))
	certB := platformsim.WeChatPayCertificate(keys[3], wechatSerialB, now.Add(-time.Minute), now.Add(5*24*time.Hour))
	a, b := hexSerial(wechatSerialA), hexSerial(wechatSerialB)
	w := startWeChatCerts(t, certA)

	// At start: A only.
	require.Eventually(t, func() bool { return w.refreshes(t, "ok") >= 1 }, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, w.held(t))
	w.accepted(t, "EV-CERT-A1", keys[0], a)
	w.refused(t, "EV-CERT-B0", keys[3], b)

	// WeChat Pay lists B beside A (A still signs): B is taken.
	w.sim.SetCertificates(wechatAPIv3Key, certA, certB)
	w.afterRefreshes(t, "ok")
	require.Equal(t, 2, w.held(t))
	w.accepted(t, "EV-CERT-B1", keys[3], b)
	w.accepted(t, "EV-CERT-A2", keys[0], a)

	// A expired, no longer the signer: B signs the downloads, trusted
	// from the last one. An expired certificate C is listed: never held.
	// D expires in a few seconds: held until then.
	kC, kD := newRSAKey(t), newRSAKey(t)
	serialD := new(big.Int).SetUint64(0x4D0D0D0D0D0D0D04)
	expiredA := platformsim.WeChatPayCertificate(keys[0], wechatSerialA, now.Add(-48*time.Hour), now.Add(-time.Hour))
	certC := platformsim.WeChatPayCertificate(kC, wechatSerialC, now.Add(-48*time.Hour), now.Add(-time.Minute))
	dExpires := time.Now().Add(3 * time.Second).Truncate(time.Second)
	certD := platformsim.WeChatPayCertificate(kD, serialD, now.Add(-time.Hour), dExpires)
	w.sim.SignAs(keys[3], b)
	w.sim.SetCertificates(wechatAPIv3Key, expiredA, certB, certC, certD)
	w.afterRefreshes(t, "ok")
	w.refused(t, "EV-CERT-C1", kC, hexSerial(wechatSerialC))
	w.accepted(t, "EV-CERT-D1", kD, hexSerial(serialD))
	w.accepted(t, "EV-CERT-B2", keys[3], b)
	w.accepted(t, "EV-CERT-A3", keys[0], a) // A is configured: the configuration is the operator's
	time.Sleep(time.Until(dExpires.Add(1100 * time.Millisecond)))
	w.refused(t, "EV-CERT-D2", kD, hexSerial(serialD))
	require.Eventually(t, func() bool { return w.held(t) == 2 }, 5*time.Second, 20*time.Millisecond, "A and B held, not C nor D")

	// A forged answer, listing an attacker's certificate E: refused,
	// counted, the certificates held stay.
	w.sim.SetCertificates(wechatAPIv3Key, certB)
	w.afterRefreshes(t, "ok")
	kE := newRSAKey(t)
	serialE := new(big.Int).SetUint64(0x5E0E0E0E0E0E0E05)
	w.sim.SignWith(keys[2])
	w.sim.SetCertificates(wechatAPIv3Key, certB, platformsim.WeChatPayCertificate(kE, serialE, now.Add(-time.Hour), now.Add(24*time.Hour)))
	w.afterRefreshes(t, "bad_signature")
	w.refused(t, "EV-CERT-E1", kE, hexSerial(serialE))
	w.accepted(t, "EV-CERT-B3", keys[3], b)
	require.Equal(t, 2, w.held(t))

	// WeChat Pay unreachable: the same.
	w.sim.SignWith(nil)
	w.sim.Down(true)
	w.afterRefreshes(t, "unreachable")
	w.accepted(t, "EV-CERT-B4", keys[3], b)
	require.Equal(t, 2, w.held(t))

	// Back: E, now listed by WeChat Pay itself, is taken.
	w.sim.Down(false)
	w.afterRefreshes(t, "ok")
	w.accepted(t, "EV-CERT-E2", kE, hexSerial(serialE))
	require.Equal(t, 3, w.held(t))
	require.Zero(t, w.sim.Refusals(), "every download was signed as WeChat Pay checks it")
	require.Equal(t, 9, w.Callbacks(t, "wechatpay"), "the accepted notifications, each stored once")
}

// wechatProcesses is a gateway and a worker of one configuration, that
// can be stopped and started again (a restart: nothing held in memory
// survives it).
type wechatProcesses struct {
	*wechatCerts
	worker *testenv.Worker
	wm     *metrics.Metrics // the worker's series
}

func startWeChatProcesses(t *testing.T, cfg *config.Config, sim *platformsim.WeChatPay, st *testenv.TestStore) *wechatProcesses {
	t.Helper()
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	wm := metrics.New("worker")
	wk := testenv.StartWorker(t, cfg, worker.Options{Metrics: wm})
	return &wechatProcesses{wechatCerts: &wechatCerts{Platform: &testenv.Platform{Cfg: cfg, GW: gw, St: st}, sim: sim}, worker: wk, wm: wm}
}

func (p *wechatProcesses) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.GW.Stop())
	require.NoError(t, p.worker.Stop())
}

// workerRefreshes counts the worker's downloads of outcome.
func (p *wechatProcesses) workerRefreshes(outcome string) int {
	return int(testutil.ToFloat64(p.wm.WeChatPayCertRefreshes.WithLabelValues("wechatpay", outcome)))
}

// TestWeChatPayCertificateSwitchSurvivesRestarts (issue 38): WeChat Pay
// switches to a new platform certificate B while the gateway and the
// worker are down, and no longer lists A. Started again with only A
// configured, both believe the first download (B's certificate decrypts
// with the APIv3 key and signs the answer), and a notification signed with
// B is accepted, stored and processed: no configuration change. (Before,
// a download was believed only signed by a key held: refused as
// bad_signature, and every notification signed with B answered 401, for
// good.) Restarted again while WeChat Pay cannot be reached, they verify
// with B from what was stored in MySQL.
func TestWeChatPayCertificateSwitchSurvivesRestarts(t *testing.T) {
	keys := testenv.RSAKeys()
	now := time.Now()
	certA := platformsim.WeChatPayCertificate(keys[0], wechatSerialA, now.Add(-time.Hour), now.Add(24*time.Hour))
	certB := platformsim.WeChatPayCertificate(keys[3], wechatSerialB, now.Add(-time.Minute), now.Add(5*24*time.Hour))
	a, b := hexSerial(wechatSerialA), hexSerial(wechatSerialB)
	sim := startWeChatCertsSim(t, certA)
	cfg := testenv.Config(t, testenv.WithPlatform("wechatpay", platform.Config{MchID: wechatMchID, APIv3Key: wechatAPIv3Key,
		Certificates: []string{certA}}), wechatMerchant(t, sim))
	st := testenv.Store(t, cfg)

	p := startWeChatProcesses(t, cfg, sim, st)
	require.Eventually(t, func() bool { return p.refreshes(t, "ok") >= 1 }, 15*time.Second, 20*time.Millisecond)
	p.accepted(t, "EV-SWITCH-A1", keys[0], a)
	p.stop(t)

	// The switch, while nothing runs: B signs, A is no longer listed.
	sim.SignAs(keys[3], b)
	sim.SetCertificates(wechatAPIv3Key, certB)

	p = startWeChatProcesses(t, cfg, sim, st)
	require.Eventually(t, func() bool {
		return p.refreshes(t, "ok") >= 1 || p.refreshes(t, "bad_signature") >= 2
	}, 15*time.Second, 20*time.Millisecond)
	require.Zero(t, p.refreshes(t, "bad_signature"), "the gateway refused WeChat Pay's download signed by its new certificate")
	require.Eventually(t, func() bool { return p.workerRefreshes("ok") >= 1 || p.workerRefreshes("bad_signature") >= 2 },
		15*time.Second, 20*time.Millisecond)
	require.Zero(t, p.workerRefreshes("bad_signature"), "the worker refused WeChat Pay's download signed by its new certificate")
	require.Equal(t, 2, p.held(t), "A (configured) and B")
	require.InDelta(t, 2, testutil.ToFloat64(p.wm.WeChatPayCertsHeld.WithLabelValues("wechatpay")), 0, "the worker holds B too")
	p.accepted(t, "EV-SWITCH-B1", keys[3], b)
	var rows []string
	require.NoError(t, st.DB.Table("wechatpay_certificates").Where("mchid = ?", wechatMchID).Pluck("serial_no", &rows).Error)
	require.Equal(t, []string{b}, rows, "the download is stored for every process")
	p.stop(t)

	// Restarted while WeChat Pay cannot be reached: B from MySQL, at once.
	sim.Down(true)
	p = startWeChatProcesses(t, cfg, sim, st)
	p.accepted(t, "EV-SWITCH-B2", keys[3], b)
	require.Zero(t, p.refreshes(t, "ok"))
	require.Eventually(t, func() bool { return p.workerRefreshes("unreachable") >= 1 }, 15*time.Second, 20*time.Millisecond)
	require.InDelta(t, 2, testutil.ToFloat64(p.wm.WeChatPayCertsHeld.WithLabelValues("wechatpay")), 0, "the worker holds B from MySQL")
	sim.Down(false)
	require.Zero(t, sim.Refusals())
	require.Equal(t, 3, p.Callbacks(t, "wechatpay"), "the accepted notifications, each stored once")
}
