package platform_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/source"
	"callgate/internal/testenv"
)

func TestAlipayHostile(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	valid := alipayExample().signed(k)
	sign := testenv.SignSHA256WithRSA(k, alipayExample().content())
	form := alipayHeader()
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name string
		body []byte
		h    http.Header
	}{
		{"truncated body", valid[:len(valid)/2], form},
		{"truncated in an escape", valid[:bytes.Index(valid, []byte("%E5"))+2], form},
		{"parameter twice", append(bytes.Clone(valid), "&trade_status=TRADE_SUCCESS"...), form},
		{"sign twice", append(bytes.Clone(valid), "&sign="...), form},
		{"invalid % escape", bytes.Replace(valid, []byte("%E5"), []byte("%ZZ"), 1), form},
		{"lone %", append(bytes.Clone(valid), "&x=%"...), form},
		{"non-UTF-8 escape", bytes.Replace(valid, []byte("%E5%A4%A7"), []byte("%B4%F3"), 1), form}, // 大 in GBK
		{"raw non-UTF-8 bytes", append(bytes.Clone(valid), "&x=\xff\xfe"...), form},
		{"huge sign", alipayExample().body("RSA2", strings.Repeat("A", 512<<10)), form},
		{"sign with whitespace", alipayExample().body("RSA2", sign[:20]+" "+sign[20:]), form},
		{"sign base64 garbage", alipayExample().body("RSA2", "****"+sign[4:]), form},
		{"empty body", nil, form},
		{"only separators", []byte("&&&"), form},
		{"JSON body", []byte(`{"notify_id":"x","sign":"` + sign + `","sign_type":"RSA2"}`), jsonCT},
		{"JSON body, form type", []byte(`{"notify_id":"x","sign":"` + sign + `"}`), form},
		{"valid form sent as JSON", valid, jsonCT},
		{"no content type", valid, http.Header{}},
		{"multipart", valid, http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}},
		{"unparsable content type", valid, http.Header{"Content-Type": {"application/x-www-form-urlencoded; ;;="}}},
		{"sign_type lower case", alipayExample().body("rsa2", sign), form},
		{"unsigned", alipayExample().body("RSA2", ""), form},
		{"empty notify_id, signed", alipayExample("notify_id", " ").signed(k), form},
		{"order too long, signed", alipayExample("out_trade_no", strings.Repeat("9", 300)).signed(k), form},
	}
	for _, c := range cases {
		a := p.Post(t, "alipay", c.body, c.h)
		requireAlipayAnswer(t, a, 0, "fail", c.name)
		t.Logf("%s: %d", c.name, a.Status)
	}
	require.Zero(t, p.Callbacks(t, "alipay"), "nothing hostile is stored")
	// Signed and ours, but not readable: stored (nothing signed is lost),
	// answered "success" so Alipay stops resending, FAILED with the reason
	// by the worker, the order untouched.
	p.CreateOrder(t, alipayOrder, 200, "CNY")
	for _, c := range []struct{ name, amount, reason string }{
		{"negative amount", "-2.00", `the notification could not be read: total_amount: amount "-2.00" is not a decimal number`},
		{"exponent amount", "2e2", `the notification could not be read: total_amount: amount "2e2" is not a decimal number`},
	} {
		id := "n-" + strings.ReplaceAll(c.name, " ", "-")
		a := p.Post(t, "alipay", alipayExample("total_amount", c.amount, "notify_id", id).signed(k), form)
		requireAlipayAnswer(t, a, http.StatusOK, "success", c.name)
		row := p.St.WaitStatus(t, logIDOf(t, p, "alipay", id), callback.StatusFailed)
		require.Equal(t, c.reason, *row.LastError, c.name)
		require.Equal(t, 1, row.Attempts, c.name)
	}
	require.Equal(t, payment.OrderUnpaid, p.Order(t, alipayOrder).PaymentStatus)
	requireAlipayAnswer(t, p.Post(t, "alipay", valid, form), http.StatusOK, "success", "a valid notification after them")
	p.Settled(t, "alipay", alipayNotify)
}

// logIDOf is the id of the one callback of source with eventID.
func logIDOf(t *testing.T, p *testenv.Platform, source, eventID string) int64 {
	t.Helper()
	var ids []int64
	require.NoError(t, p.St.DB.Table("callback_log").Where("source = ? AND event_id = ?", source, eventID).Pluck("id", &ids).Error)
	require.Len(t, ids, 1, "one callback_log row for %s %s", source, eventID)
	return ids[0]
}

func FuzzAlipayRead(f *testing.F) {
	k := testenv.RSAKeys()[0]
	p, err := platform.New("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	require.NoError(f, err)
	const ct = "application/x-www-form-urlencoded; charset=utf-8"
	for _, status := range []string{"TRADE_SUCCESS", "TRADE_FINISHED", "TRADE_CLOSED", "WAIT_BUYER_PAY"} {
		f.Add(alipayExample("trade_status", status).signed(k), ct, false)
	}
	var params []string
	for _, e := range alipayExample() {
		params = append(params, url.QueryEscape(e[0])+"="+url.QueryEscape(e[1]))
	}
	f.Add([]byte(strings.Join(params, "&")), ct, true)
	f.Add([]byte("app_id="+alipayAppID+"&notify_id=1&out_trade_no=O&trade_status=TRADE_SUCCESS&trade_no=T&total_amount=1e3"), ct, true)
	f.Add(alipayExample().body("RSA", "AAAA"), ct, false)
	f.Add([]byte("sign=%zz&sign_type=RSA2"), ct, false)
	f.Add([]byte(""), "", false)
	f.Add([]byte(`{"a":1}`), "application/json", false)
	// With sign set, the harness signs the fuzzed parameters itself, so the
	// fuzzer reaches what comes after the signature.
	f.Fuzz(func(t *testing.T, body []byte, contentType string, sign bool) {
		if sign {
			form, err := platform.ParseForm(body)
			if err != nil {
				return
			}
			var params alipayParams
			for name, v := range form {
				params = append(params, [2]string{name, v})
			}
			body, contentType = params.signed(k), ct
		}
		cbs, err := p.Read(platform.Request{Header: http.Header{"Content-Type": {contentType}}, Body: body, Now: time.Now()})
		if err != nil {
			require.Nil(t, cbs)
			require.NotContains(t, err.Error(), bareBase64(k)[:40], "an error never shows the key")
			return
		}
		require.Len(t, cbs, 1)
		requireCanonical(t, cbs[0])
	})
}

func BenchmarkAlipayRead(b *testing.B) {
	k := testenv.RSAKeys()[0]
	p, err := platform.New("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	require.NoError(b, err)
	req := platform.Request{Header: alipayHeader(), Body: alipayExample().signed(k), Now: time.Now()}
	benchRead(b, p, req)
}

// loadShipped loads configs/callgate.yaml with the environment the test
// set.
func loadShipped(t *testing.T) (*config.Config, error) {
	t.Helper()
	return config.Load(filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml"), kinds.Names())
}

// unsetEnv unsets the variables for the test; t.Setenv restores them
// after it.
func unsetEnv(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		t.Setenv(n, "")
		os.Unsetenv(n)
	}
}

// shippedSource is the shipped source name of cfg.
func shippedSource(t *testing.T, cfg *config.Config, name string) source.Config {
	t.Helper()
	for _, s := range cfg.Sources {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no source %s in configs/callgate.yaml", name)
	return source.Config{}
}

func TestAlipayConfiguration(t *testing.T) {
	k := testenv.RSAKeys()[0]
	unsetEnv(t, "ALIPAY_PUBLIC_KEY", "ALIPAY_PUBLIC_KEY_FILE", "ALIPAY_APP_ID")
	cfg, err := loadShipped(t)
	require.NoError(t, err)
	require.True(t, shippedSource(t, cfg, "alipay").Disabled(), "without its key the alipay source is disabled")

	t.Setenv("ALIPAY_APP_ID", alipayAppID)
	cfg, err = loadShipped(t)
	require.NoError(t, err)
	require.True(t, shippedSource(t, cfg, "alipay").Disabled(), "an app id alone enables nothing")

	t.Setenv("ALIPAY_PUBLIC_KEY", "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA-not-base64")
	_, err = loadShipped(t)
	require.ErrorContains(t, err, "(alipay).platform.public_keys[0].key: neither PEM nor base64 DER")
	require.NotContains(t, err.Error(), "not-base64", "the error does not repeat the key")

	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	t.Setenv("ALIPAY_PUBLIC_KEY", bareBase64(small))
	_, err = loadShipped(t)
	require.ErrorContains(t, err, "(alipay).platform.public_keys[0].key: the RSA key has 1024 bits, fewer than 2048")

	// From a mounted file, as PEM: enabled and serving.
	file := filepath.Join(t.TempDir(), "alipay.pem")
	require.NoError(t, os.WriteFile(file, []byte(testenv.RSAPublicKeyPEM(k)), 0o600))
	os.Unsetenv("ALIPAY_PUBLIC_KEY")
	t.Setenv("ALIPAY_PUBLIC_KEY_FILE", file)
	cfg, err = loadShipped(t)
	require.NoError(t, err)
	src := shippedSource(t, cfg, "alipay")
	require.False(t, src.Disabled())
	require.Equal(t, alipayAppID, src.Platform.AppID)
	p, err := platform.New(src.Preset, src.Platform)
	require.NoError(t, err)
	_, err = p.Read(platform.Request{Header: alipayHeader(), Body: alipayExample().signed(k), Now: time.Now()})
	require.NoError(t, err, "the key from the file verifies")

	_, err = platform.New("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, APIv3Key: "x"})
	require.ErrorContains(t, err, "platform.apiv3_key: does not apply to preset alipay")
}
