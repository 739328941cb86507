package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/gateway"
	"callgate/internal/kinds"
	"callgate/internal/logging"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// startLogged runs the gateway from cfg with its log captured, until the
// test ends, and returns its URL and the log.
func startLogged(t *testing.T, cfg *config.Config) (string, *testenv.SyncBuffer) {
	t.Helper()
	url, logs := runLogged(t, cfg)
	testenv.WaitReadyURL(t, url)
	return url, logs
}

// runLogged is startLogged without waiting for the gateway to be ready.
func runLogged(t *testing.T, cfg *config.Config) (string, *testenv.SyncBuffer) {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, cfg, logging.New(logging.Config{Level: "info", Format: "json"}, logs), ln)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return "http://" + ln.Addr().String(), logs
}

// disabledLine is the one start-up line that names the disabled sources.
func disabledLine(t *testing.T, logs *testenv.SyncBuffer) map[string]any {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "sources disabled") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "one line lists the disabled sources:\n%s", logs.String())
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
	return line
}

// disabledReason is the reason of source's own start-up line (one line
// per disabled source, after the one naming them all).
func disabledReason(t *testing.T, logs *testenv.SyncBuffer, source string) string {
	t.Helper()
	var reasons []string
	for _, l := range strings.Split(logs.String(), "\n") {
		var line struct{ Msg, Source, Reason string }
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "gateway: source disabled" && line.Source == source {
			reasons = append(reasons, line.Reason)
		}
	}
	require.Len(t, reasons, 1, "one line gives why %s is disabled:\n%s", source, logs.String())
	return reasons[0]
}

// requireNotEnabled: a disabled source answers 404 naming it as not
// enabled.
func requireNotEnabled(t *testing.T, url, name string) {
	t.Helper()
	a := testenv.PostRaw(t, url, name, []byte(`{}`), http.Header{"Content-Type": {"application/json"}})
	require.Equal(t, http.StatusNotFound, a.Status, name)
	require.JSONEq(t, `{"error":"source \"`+name+`\" is not enabled on this gateway"}`, string(a.Body), name)
}

// TestPresetSourcesWithoutKeysAreDisabled: the shipped configuration lists
// every platform; those whose keys are unset answer 404 and are named in
// one start-up line, the one given its key serves.
func TestPresetSourcesWithoutKeysAreDisabled(t *testing.T) {
	cfg := testenv.Config(t, testenv.WithPlatform("stripe", platform.Config{Secrets: []string{"whsec_enabled"}}))
	var disabled []string
	for _, s := range cfg.Sources {
		if s.Disabled() {
			disabled = append(disabled, s.Name)
		}
	}
	require.Contains(t, disabled, "shopify")
	require.NotContains(t, disabled, "stripe")

	url, logs := startLogged(t, cfg)
	require.Equal(t, strings.Join(disabled, ", "), disabledLine(t, logs)["sources"])
	for _, name := range disabled {
		requireNotEnabled(t, url, name)
	}
	a := testenv.PostRaw(t, url, "stripe", []byte(`{}`), http.Header{"Content-Type": {"application/json"}})
	require.Equal(t, http.StatusUnauthorized, a.Status, "stripe is enabled: an unsigned request is refused, not unknown")
}

// TestPaymentPresetsNeedTheirMerchant: a payment preset whose keys are set
// stays disabled (404, named with the missing setting in the one start-up
// line) until its merchant identity is configured: Alipay's app id, WeChat
// Pay's merchant id, Adyen's merchant accounts, Shopify's shops.
func TestPaymentPresetsNeedTheirMerchant(t *testing.T) {
	k := testenv.RSAKeys()[0]
	keys := map[string]map[string]string{
		"alipay": {"ALIPAY_PUBLIC_KEY": testenv.RSAPublicKeyPEM(k), "ALIPAY_APP_ID": "2015102700040153"},
		"wechatpay": {"WECHATPAY_APIV3_KEY": "callgate0test0apiv3key0032bytes!", "WECHATPAY_PUBLIC_KEY_ID": "PUB_KEY_ID_01",
			"WECHATPAY_PUBLIC_KEY": testenv.RSAPublicKeyPEM(k), "WECHATPAY_MCHID": "1230000109"},
		"adyen":   {"ADYEN_HMAC_KEY": "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00", "ADYEN_MERCHANT_ACCOUNTS": "CallgateECOM"},
		"shopify": {"SHOPIFY_WEBHOOK_SECRET": "shpss_test", "SHOPIFY_SHOP_DOMAINS": "a.myshopify.com"},
	}
	required := map[string]string{"alipay": "ALIPAY_APP_ID", "wechatpay": "WECHATPAY_MCHID", "adyen": "ADYEN_MERCHANT_ACCOUNTS",
		"shopify": "SHOPIFY_SHOP_DOMAINS"}
	for name, env := range keys {
		t.Run(name, func(t *testing.T) {
			for _, vars := range keys {
				for v := range vars {
					t.Setenv(v, "")
				}
			}
			for v, val := range env {
				t.Setenv(v, val)
			}
			t.Setenv(required[name], "")
			url, logs := startLogged(t, testenv.Config(t))
			line := disabledLine(t, logs)
			require.Contains(t, strings.Split(line["sources"].(string), ", "), name)
			require.Contains(t, disabledReason(t, logs, name), "platform.")
			require.Contains(t, disabledReason(t, logs, name), "("+required[name]+") not set")
			requireNotEnabled(t, url, name)

			t.Setenv(required[name], env[required[name]])
			url, logs = startLogged(t, testenv.Config(t))
			require.NotContains(t, strings.Split(disabledLine(t, logs)["sources"].(string), ", "), name)
			a := testenv.PostRaw(t, url, name, []byte(`{}`), http.Header{"Content-Type": {"application/json"}})
			require.NotEqual(t, http.StatusNotFound, a.Status, "%s serves once its merchant is set", name)
		})
	}
}

// TestDemoSourcesOnlyInDemoMode: outside demo mode (CALLGATE_DEMO unset)
// the sources whose secrets are the README's demo values are disabled and
// named, with the reason, in the start-up line; a request signed with the
// published demo secret pays nothing. With CALLGATE_DEMO=1, or with their
// own secrets set, they serve.
func TestDemoSourcesOnlyInDemoMode(t *testing.T) {
	t.Setenv("PAYDEMO_SECRET", "")
	os.Unsetenv("PAYDEMO_SECRET")
	t.Setenv("SHIPDEMO_SECRET", "")
	os.Unsetenv("SHIPDEMO_SECRET")
	t.Setenv(config.EnvDemo, "")
	demoOff := func(c *config.Config) { c.Demo = false }

	cfg := testenv.Config(t, demoOff)
	url, logs := startLogged(t, cfg)
	line := disabledLine(t, logs)
	for _, name := range []string{"paydemo", "shipdemo"} {
		require.Contains(t, strings.Split(line["sources"].(string), ", "), name)
		require.Contains(t, disabledReason(t, logs, name), "its secret is the README's demo value")
	}
	body := testenv.PaymentBody("ORD-DEMO", "PAY-DEMO", 1999)
	a := testenv.PostRaw(t, url, "paydemo", body, testenv.PaydemoHeaders(t, cfg, "msg-demo", time.Now(), body))
	require.Equal(t, http.StatusNotFound, a.Status, "the published demo secret signs nothing in production")

	t.Setenv(config.EnvDemo, "1")
	cfg, err := config.Load(filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml"), kinds.Names())
	require.NoError(t, err)
	require.True(t, cfg.Demo, "CALLGATE_DEMO=1 is demo mode")

	t.Setenv(config.EnvDemo, "")
	t.Setenv("PAYDEMO_SECRET", "Y2FsbGdhdGUtcGF5ZGVtby1kZW1vLWtleS0zMmJ5dGU=") // the demo key without its whsec_ prefix
	require.Contains(t, testenv.Config(t, demoOff).Sources[0].DisabledReason(false), "demo value", "the demo key however written")

	t.Setenv("PAYDEMO_SECRET", "whsec_"+base64.StdEncoding.EncodeToString([]byte("a-real-secret-of-32-bytes-long!!")))
	cfg = testenv.Config(t, demoOff)
	require.Empty(t, cfg.Sources[0].DisabledReason(false), "paydemo with its own secret serves")
	url, _ = startLogged(t, cfg)
	a = testenv.PostRaw(t, url, "paydemo", body, testenv.PaydemoHeaders(t, cfg, "msg-demo", time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
}

// TestPresetKeysSetButInvalidStopTheStart: a key that is set but unusable
// is a configuration error naming the source and the key.
func TestPresetKeysSetButInvalidStopTheStart(t *testing.T) {
	cfg := testenv.Config(t)
	for i := range cfg.Sources {
		if cfg.Sources[i].Name == "stripe" {
			cfg.Sources[i].Platform.Secrets = []string{" whsec_with_a_space"}
		}
	}
	err := cfg.Validate([]string{"payment", "logistics"})
	require.ErrorContains(t, err, "(stripe).platform.secrets: secrets[0]: secret has leading or trailing whitespace")
	require.NotContains(t, err.Error(), "whsec_with_a_space", "the key itself is never printed")
}

// TestReadyzLogsOncePerChange: /readyz is anyone's to ask; a dependency
// that is down is logged when it goes down, not on every ask.
func TestReadyzLogsOncePerChange(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.AMQP.URL = "amqp://guest:guest@127.0.0.1:1/" }) // nothing listens there
	base, logs := runLogged(t, cfg)
	url := base + "/readyz"
	asked := 0
	require.Eventually(t, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			asked++
		}
		return asked >= 20
	}, 20*time.Second, 10*time.Millisecond)
	lines := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"gateway: not ready"`) && strings.Contains(l, `"dependency":"rabbitmq"`) {
			lines++
		}
	}
	require.Equal(t, 1, lines, "asked %d times:\n%s", asked, logs.String())
}

// TestDisabledSourceRequestNamesTheReason: a request to a disabled source
// is answered 404 "not enabled on this gateway", never with why, and
// logged with why the source is disabled and the request's trace id,
// once: the next requests within the minute are not logged (the log is
// not a caller's to fill), and a source no config names is logged as
// today.
func TestDisabledSourceRequestNamesTheReason(t *testing.T) {
	cfg := testenv.Config(t)
	url, logs := startLogged(t, cfg)
	why := disabledReason(t, logs, "stripe")
	var first testenv.RawAnswer
	for i := range 3 {
		a := testenv.PostRaw(t, url, "stripe", []byte(`{}`), http.Header{"Content-Type": {"application/json"}})
		require.Equal(t, http.StatusNotFound, a.Status)
		require.JSONEq(t, `{"error":"source \"stripe\" is not enabled on this gateway"}`, string(a.Body), "the caller is not told why")
		if i == 0 {
			first = a
		}
	}
	var lines []map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == "intake: request to a disabled source (answered 404 not enabled)" {
			lines = append(lines, line)
		}
	}
	require.Len(t, lines, 1, "three requests within a minute, one line:\n%s", logs.String())
	require.Equal(t, "stripe", lines[0]["source"])
	require.Equal(t, why, lines[0]["reason"])
	require.Contains(t, why, "STRIPE_WEBHOOK_SECRET")
	require.EqualValues(t, http.StatusNotFound, lines[0]["status"])
	require.Equal(t, first.Header.Get("X-Trace-Id"), lines[0]["trace_id"], "the first request's trace id")
}
