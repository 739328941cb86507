// Package samples sends the platforms' own published samples (their SDKs'
// notification test fixtures and their documentation's examples, kept
// byte for byte in <platform>/) through a real gateway and worker against
// the real MariaDB and RabbitMQ, and checks what each platform's
// documentation says the sample means: the answer the platform expects and
// the outcome on the order, its payments, refunds and disputes, the
// shipment, and the notifications written.
//
// Every sample's source and expectation are in its folder's PROVENANCE.md:
// a "### <file>" section per sample, whose ```expect block the test reads
// (the directives are listed at parseExpect). A sample marked
// "known-failing: <why>" there is skipped with that reason; nothing else
// is.
package samples

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"callgate/internal/callback"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// Keys. Where the platform publishes the key its sample was signed with,
// that key; otherwise the test's own, and the verbatim body is signed
// again the platform's way.
const (
	// stripe-go webhook/client_test.go testSecret.
	stripeSecret = "whsec_test_secret"
	// adyen-go-api-library src/hmacvalidator/hmacvalidator_test.go key.
	adyenKey = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	// The APIv3 key of the published AEAD_AES_256_GCM vector of the
	// documented TRANSACTION.SUCCESS resource (wechatpay/PROVENANCE.md).
	wechatVectorKey = "5YI2YwEdV56hCsNEoOGEeL17vRFcz3i6"
	wechatPubKeyID  = "PUB_KEY_ID_0114232134912410000000000000"
	kuaidiSalt      = "callgate-samples-salt"
	shopifySecret   = "callgate-samples-shopify-secret"
)

// sample is one sample file and what its provenance says.
type sample struct {
	platform, file string
	body           []byte
	ex             expect
}

// expect is a sample's ```expect block.
type expect struct {
	config       string
	orders       [][3]string // code amount currency
	paidBy       [][4]string // order payment amount currency
	shipments    [][3]string // waybill order status
	shop, topic  string
	status       int
	body         string
	callback     string
	orderChecks  []string
	facts        [][3]string
	notify       []string
	noNotify     bool
	shipChecks   [][2]string
	knownFailing string
}

// parseExpect reads the directives, one a line:
//
//	config: <name>                 the source configuration (see configFor)
//	order: <code> <amount> <CUR>   an UNPAID order created first
//	paid-by: <order> <payment> <amount> <CUR>
//	                               the order paid first, by a notification the
//	                               test makes in the platform's shape
//	shipment: <waybill> <order> <status>   a shipment recorded first
//	shop: <domain>, topic: <topic> Shopify's unsigned headers
//	answer: <status> [<body>]      the platform's expected answer
//	callback: SUCCESS|FAILED       what every callback the sample made ends as
//	expect-order: <code> k=v...    status, payment, refunded, dispute
//	expect-fact: <kind> <ref> <status>   a payment_facts row
//	expect-notify: <routing key>   a notification written for the sample
//	expect-no-notify               none written
//	expect-shipment: <waybill> <status>
//	known-failing: <why>           callgate gets it wrong today: skipped
func parseExpect(t *testing.T, where, block string) expect {
	t.Helper()
	ex := expect{config: "default"}
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		f := strings.Fields(v)
		switch k {
		case "config":
			ex.config = v
		case "order":
			require.Len(t, f, 3, where+": "+line)
			ex.orders = append(ex.orders, [3]string{f[0], f[1], f[2]})
		case "paid-by":
			require.Len(t, f, 4, where+": "+line)
			ex.paidBy = append(ex.paidBy, [4]string{f[0], f[1], f[2], f[3]})
		case "shipment":
			require.Len(t, f, 3, where+": "+line)
			ex.shipments = append(ex.shipments, [3]string{f[0], f[1], f[2]})
		case "shop":
			ex.shop = v
		case "topic":
			ex.topic = v
		case "answer":
			s, body, _ := strings.Cut(v, " ")
			n, err := strconv.Atoi(s)
			require.NoError(t, err, where+": "+line)
			ex.status, ex.body = n, body
		case "callback":
			ex.callback = v
		case "expect-order":
			ex.orderChecks = append(ex.orderChecks, v)
		case "expect-fact":
			require.Len(t, f, 3, where+": "+line)
			ex.facts = append(ex.facts, [3]string{f[0], f[1], f[2]})
		case "expect-notify":
			ex.notify = append(ex.notify, v)
		case "expect-no-notify":
			ex.noNotify = true
		case "expect-shipment":
			require.Len(t, f, 2, where+": "+line)
			ex.shipChecks = append(ex.shipChecks, [2]string{f[0], f[1]})
		case "known-failing":
			ex.knownFailing = v
		default:
			require.FailNow(t, where+": unknown directive "+line)
		}
	}
	require.NotZero(t, ex.status, where+": no answer: directive")
	return ex
}

var sectionRE = regexp.MustCompile("(?ms)^### `?([^`\\n]+?)`?\\s*$(.*?)^```expect\\n(.*?)^```")

// corpus reads every platform folder's PROVENANCE.md and the samples it
// lists; every sample file in a folder must be listed.
func corpus(t *testing.T) []sample {
	t.Helper()
	var out []sample
	for _, pf := range []string{"alipay", "wechatpay", "stripe", "adyen", "shopify", "kuaidi100"} {
		prov, err := os.ReadFile(filepath.Join(pf, "PROVENANCE.md"))
		require.NoError(t, err)
		listed := map[string]bool{}
		for _, m := range sectionRE.FindAllStringSubmatch(string(prov), -1) {
			name := strings.TrimSpace(m[1])
			body, err := os.ReadFile(filepath.Join(pf, name))
			require.NoError(t, err, "%s/PROVENANCE.md lists %s", pf, name)
			listed[name] = true
			out = append(out, sample{platform: pf, file: name, body: body, ex: parseExpect(t, pf+"/"+name, m[3])})
		}
		files, err := os.ReadDir(pf)
		require.NoError(t, err)
		for _, f := range files {
			if n := f.Name(); n != "PROVENANCE.md" && !strings.HasSuffix(n, ".resource.json") {
				require.True(t, listed[n], "%s/%s has no section in PROVENANCE.md", pf, n)
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestPublishedSamples(t *testing.T) {
	for _, s := range corpus(t) {
		t.Run(s.platform+"/"+s.file, func(t *testing.T) {
			if s.ex.knownFailing != "" && os.Getenv("SAMPLES_RUN_KNOWN_FAILING") == "" {
				t.Skip("known-failing: " + s.ex.knownFailing)
			}
			t.Parallel()
			runSample(t, s)
		})
	}
}

// source is the shipped source a platform's preset runs in.
func source(pf string) string {
	if pf == "wechatpay" {
		return "wechatpay"
	}
	return pf
}

// configFor is the source configuration, as docs/platforms/<platform>.md
// tells an operator, bound to the sample's merchant.
func configFor(t *testing.T, pf, name string) platform.Config {
	t.Helper()
	k := testenv.RSAKeys()[0]
	switch pf + "/" + name {
	case "alipay/default": // the documented example's app and seller
		return platform.Config{PublicKeys: []platform.PublicKey{{Key: testenv.RSAPublicKeyPEM(k)}},
			AppID: "2015102700040153", SellerID: "2088102119685838"}
	case "alipay/gbk-2022": // the captured GBK notification's app and seller (alipay/PROVENANCE.md)
		return platform.Config{PublicKeys: []platform.PublicKey{{Key: testenv.RSAPublicKeyPEM(k)}},
			AppID: "2021001166613270", SellerID: "2088022931802892"}
	case "alipay/gbk-2021":
		return platform.Config{PublicKeys: []platform.PublicKey{{Key: testenv.RSAPublicKeyPEM(k)}},
			AppID: "2021001188613166", SellerID: "2088931260191242"}
	case "wechatpay/vector": // the published vector's merchant, app and APIv3 key
		return platform.Config{MchID: "1230000109", AppID: "wxd678efh567hg6787", APIv3Key: wechatVectorKey,
			PublicKeys: []platform.PublicKey{{ID: wechatPubKeyID, Key: testenv.RSAPublicKeyPEM(k)}}}
	case "wechatpay/refund-doc": // the documented refund's merchant
		return platform.Config{MchID: "1900000100", APIv3Key: wechatVectorKey,
			PublicKeys: []platform.PublicKey{{ID: wechatPubKeyID, Key: testenv.RSAPublicKeyPEM(k)}}}
	case "stripe/default": // test-mode events, the endpoint secret stripe-go's tests publish
		return platform.Config{Secrets: []string{stripeSecret}, Livemode: "false"}
	case "adyen/default": // the samples' test-environment merchant accounts
		return platform.Config{Secrets: []string{adyenKey}, Livemode: "false",
			MerchantAccounts: "MagentoMerchantTest2,YOUR_MERCHANT_ACCOUNT,MagentoMerchantAlessio2"}
	case "adyen/live": // java_chargeback.json is a live notification of TestMerchant
		return platform.Config{Secrets: []string{adyenKey}, Livemode: "true", MerchantAccounts: "TestMerchant"}
	case "shopify/default":
		return platform.Config{Secrets: []string{shopifySecret}, ShopDomains: "jsmith.myshopify.com,go-shopify.myshopify.com"}
	case "kuaidi100/default":
		return platform.Config{Secrets: []string{kuaidiSalt}}
	}
	require.FailNow(t, "no configuration "+pf+"/"+name)
	return platform.Config{}
}

func runSample(t *testing.T, s sample) {
	src := source(s.platform)
	p := testenv.StartPlatform(t, src, configFor(t, s.platform, s.ex.config))
	for _, o := range s.ex.orders {
		amount, err := strconv.ParseInt(o[1], 10, 64)
		require.NoError(t, err)
		p.CreateOrder(t, o[0], amount, o[2])
	}
	for _, sh := range s.ex.shipments {
		_, err := p.St.SQL.Exec(`INSERT INTO shipments (waybill_no, order_code, status, last_seq, updated_at) VALUES (?, ?, ?, 0, NOW(6))`,
			sh[0], sh[1], sh[2])
		require.NoError(t, err)
	}
	for _, pb := range s.ex.paidBy {
		payFirst(t, p, s, pb)
	}

	before := maxLogID(t, p)
	body, h := signed(t, s)
	a := p.Post(t, src, body, h)
	require.Equal(t, s.ex.status, a.Status, "the platform's expected answer: %s", a.Body)
	if s.ex.body != "" {
		if s.ex.body == "kuaidi100-true" {
			var ans struct {
				Result     bool   `json:"result"`
				ReturnCode string `json:"returnCode"`
			}
			require.NoError(t, json.Unmarshal(a.Body, &ans), "%s", a.Body)
			require.True(t, ans.Result, "%s", a.Body)
			require.Equal(t, "200", ans.ReturnCode, "%s", a.Body)
		} else {
			require.Equal(t, s.ex.body, string(a.Body))
		}
	}

	ids := logIDsAfter(t, p, before)
	if s.ex.callback == "" {
		require.Empty(t, ids, "nothing stored")
	} else {
		require.NotEmpty(t, ids, "the sample is stored")
	}
	var notes []string
	for _, id := range ids {
		row := waitSettled(t, p, id)
		require.Equal(t, s.ex.callback, string(row.Status), "callback %d: %s", id, lastError(row))
		notes = append(notes, p.St.Notifications(t, id)...)
	}
	keys := map[string]bool{}
	for _, n := range notes {
		k, _, _ := strings.Cut(n, " ")
		keys[k] = true
	}
	for _, k := range s.ex.notify {
		require.True(t, keys[k], "notification %s written; got %v", k, notes)
	}
	if s.ex.noNotify {
		require.Empty(t, notes, "no notification")
	}
	for _, c := range s.ex.orderChecks {
		checkOrder(t, p, c)
	}
	for _, f := range s.ex.facts {
		var n int64
		require.NoError(t, p.St.DB.Raw(`SELECT COUNT(*) FROM payment_facts WHERE kind = ? AND ref = ? AND status = ?`, f[0], f[1], f[2]).Scan(&n).Error)
		require.NotZero(t, n, "a %s fact %s %s; facts: %v", f[0], f[1], f[2], facts(t, p))
	}
	for _, sc := range s.ex.shipChecks {
		var status string
		require.NoError(t, p.St.DB.Raw(`SELECT status FROM shipments WHERE waybill_no = ?`, sc[0]).Scan(&status).Error)
		require.Equal(t, sc[1], status, "shipment %s", sc[0])
	}
}

func lastError(l *callback.Log) string {
	if l.LastError != nil {
		return *l.LastError
	}
	return ""
}

func maxLogID(t *testing.T, p *testenv.Platform) int64 {
	var id int64
	require.NoError(t, p.St.DB.Raw(`SELECT COALESCE(MAX(id), 0) FROM callback_log`).Scan(&id).Error)
	return id
}

func logIDsAfter(t *testing.T, p *testenv.Platform, after int64) []int64 {
	var ids []int64
	require.NoError(t, p.St.DB.Raw(`SELECT id FROM callback_log WHERE id > ? ORDER BY id`, after).Scan(&ids).Error)
	return ids
}

// waitSettled waits for the callback to leave PENDING (a FAILED dead
// letter included).
func waitSettled(t *testing.T, p *testenv.Platform, id int64) *callback.Log {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := p.St.GetCallback(t.Context(), id)
		if err == nil && l.Status != callback.StatusPending {
			return l
		}
		require.True(t, time.Now().Before(deadline), "callback %d never settled", id)
		time.Sleep(20 * time.Millisecond)
	}
}

func checkOrder(t *testing.T, p *testenv.Platform, check string) {
	t.Helper()
	f := strings.Fields(check)
	o := p.Order(t, f[0])
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "status":
			require.Equal(t, v, o.PaymentStatus, "order %s status; facts %v", f[0], facts(t, p))
		case "payment":
			require.NotNil(t, o.PaymentNo, "order %s payment", f[0])
			require.Equal(t, v, *o.PaymentNo, "order %s payment", f[0])
		case "refunded":
			require.Equal(t, v, strconv.FormatInt(o.RefundedAmount, 10), "order %s refunded", f[0])
		case "dispute":
			require.NotNil(t, o.DisputeStatus, "order %s dispute; facts %v", f[0], facts(t, p))
			require.Equal(t, v, *o.DisputeStatus, "order %s dispute", f[0])
		default:
			require.FailNow(t, "unknown order check "+kv)
		}
	}
}

func facts(t *testing.T, p *testenv.Platform) []string {
	var rows []struct{ OrderCode, Kind, Ref, Status string }
	require.NoError(t, p.St.DB.Raw(`SELECT order_code, kind, ref, status FROM payment_facts ORDER BY callback_log_id`).Scan(&rows).Error)
	var out []string
	for _, r := range rows {
		out = append(out, r.OrderCode+" "+r.Kind+" "+r.Ref+" "+r.Status)
	}
	return out
}

// ------------------------------------------------------------ signing

// signed is the request the platform sends with the sample: the verbatim
// body (Alipay's and Kuaidi100's as the form they post, WeChat Pay's
// documented refund resource encrypted as WeChat Pay does), signed.
func signed(t *testing.T, s sample) ([]byte, http.Header) {
	t.Helper()
	h := http.Header{}
	switch s.platform {
	case "alipay":
		h.Set("Content-Type", "application/x-www-form-urlencoded; charset="+alipayCharset(string(s.body)))
		return alipayForm(t, string(s.body)), h
	case "kuaidi100":
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		param := string(s.body)
		sum := md5.Sum([]byte(param + kuaidiSalt))
		return []byte("param=" + url.QueryEscape(param) + "&sign=" + strings.ToUpper(hex.EncodeToString(sum[:]))), h
	case "stripe":
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: s.body, Secret: stripeSecret, Timestamp: time.Now()})
		h.Set("Content-Type", "application/json")
		h.Set("Stripe-Signature", sp.Header)
		return s.body, h
	case "adyen":
		h.Set("Content-Type", "application/json")
		return adyenResign(t, s.body), h
	case "shopify":
		m := hmac.New(sha256.New, []byte(shopifySecret))
		m.Write(s.body)
		h.Set("Content-Type", "application/json")
		h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(m.Sum(nil)))
		h.Set("X-Shopify-Topic", s.ex.topic)
		h.Set("X-Shopify-Shop-Domain", s.ex.shop)
		h.Set("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")
		return s.body, h
	case "wechatpay":
		body := s.body
		if strings.HasSuffix(s.file, ".envelope.json") {
			body = wechatEnvelope(t, s)
		}
		return body, wechatHeaders(body)
	}
	require.FailNow(t, "no signer for "+s.platform)
	return nil, nil
}

// alipayCharset is the sample's own charset parameter (utf-8 without
// one), which Alipay's form is written in and its Content-Type names.
func alipayCharset(decoded string) string {
	for _, kv := range strings.Split(strings.TrimRight(decoded, "\n"), "&") {
		if k, v, _ := strings.Cut(kv, "="); k == "charset" && v != "" {
			return v
		}
	}
	return "utf-8"
}

// alipayForm is the documented decoded parameter string as Alipay posts
// it: each value form-encoded, with sign (RSA2 over the sorted decoded
// parameters, the string the documentation shows) and sign_type. The
// bytes are the sample's own, so a GBK sample is signed and form-encoded
// as its GBK bytes, as Alipay signs (content.getBytes(charset)).
func alipayForm(t *testing.T, decoded string) []byte {
	t.Helper()
	decoded = strings.TrimRight(decoded, "\n")
	pairs := strings.Split(decoded, "&")
	sorted := append([]string(nil), pairs...)
	sort.Strings(sorted)
	sig := testenv.SignSHA256WithRSA(testenv.RSAKeys()[0], []byte(strings.Join(sorted, "&")))
	var enc []string
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, kv)
		enc = append(enc, url.QueryEscape(k)+"="+url.QueryEscape(v))
	}
	enc = append(enc, "sign="+url.QueryEscape(sig), "sign_type=RSA2")
	return []byte(strings.Join(enc, "&"))
}

var (
	adyenItemRE = regexp.MustCompile(`"NotificationRequestItem"\s*:\s*\{`)
	adyenAddRE  = regexp.MustCompile(`"additionalData"\s*:\s*\{`)
	adyenSigRE  = regexp.MustCompile(`("hmacSignature"\s*:\s*")[^"]*(")`)
)

// adyenResign signs each item of the verbatim body with the published
// test key, as Adyen signs with the merchant's key: the item's
// additionalData.hmacSignature replaced, or added where the sample was
// published without one. Nothing else of the body changes.
func adyenResign(t *testing.T, body []byte) []byte {
	t.Helper()
	var n struct {
		NotificationItems []struct {
			Item struct {
				PSP      string `json:"pspReference"`
				Original string `json:"originalReference"`
				Account  string `json:"merchantAccountCode"`
				Ref      string `json:"merchantReference"`
				Amount   struct {
					Value    int64  `json:"value"`
					Currency string `json:"currency"`
				} `json:"amount"`
				Event   string         `json:"eventCode"`
				Success string         `json:"success"`
				Add     map[string]any `json:"additionalData"`
			} `json:"NotificationRequestItem"`
		} `json:"notificationItems"`
	}
	require.NoError(t, json.Unmarshal(body, &n))
	require.Len(t, n.NotificationItems, 1, "one item a sample")
	it := n.NotificationItems[0].Item
	sig := adyenSign(it.PSP, it.Original, it.Account, it.Ref, it.Amount.Value, it.Amount.Currency, it.Event, it.Success)
	s := string(body)
	switch {
	case adyenSigRE.MatchString(s):
		s = adyenSigRE.ReplaceAllString(s, "${1}"+strings.ReplaceAll(sig, "$", "$$")+"${2}")
	case it.Add != nil:
		loc := adyenAddRE.FindStringIndex(s)
		s = s[:loc[1]] + `"hmacSignature":"` + sig + `",` + s[loc[1]:]
	default:
		loc := adyenItemRE.FindStringIndex(s)
		s = s[:loc[1]] + `"additionalData":{"hmacSignature":"` + sig + `"},` + s[loc[1]:]
	}
	return []byte(s)
}

func adyenSign(psp, original, account, ref string, value int64, currency, event, success string) string {
	k, err := hex.DecodeString(adyenKey)
	if err != nil {
		panic(err)
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(strings.Join([]string{psp, original, account, ref, strconv.FormatInt(value, 10), currency, event, success}, ":")))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// wechatHeaders signs body as WeChat Pay does, with the test's key named
// as a WeChat Pay public key.
func wechatHeaders(body []byte) http.Header {
	stamp, nonce := strconv.FormatInt(time.Now().Unix(), 10), rand.Text()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Wechatpay-Serial", wechatPubKeyID)
	h.Set("Wechatpay-Timestamp", stamp)
	h.Set("Wechatpay-Nonce", nonce)
	h.Set("Wechatpay-Signature", testenv.SignSHA256WithRSA(testenv.RSAKeys()[0], []byte(stamp+"\n"+nonce+"\n"+string(body)+"\n")))
	h.Set("Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048")
	return h
}

func wechatSeal(t *testing.T, plaintext []byte, aad string) (ciphertext, nonce string) {
	t.Helper()
	block, err := aes.NewCipher([]byte(wechatVectorKey))
	require.NoError(t, err)
	gcm, err := cipher.NewGCM(block)
	require.NoError(t, err)
	nonce = rand.Text()[:12]
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte(aad))), nonce
}

// wechatEnvelope is the documented envelope <name>.envelope.json with its
// elided ciphertext and nonce filled: the documented resource
// <name>.resource.json (verbatim) encrypted with the configured APIv3 key
// and the envelope's own associated_data, as WeChat Pay encrypts it.
func wechatEnvelope(t *testing.T, s sample) []byte {
	t.Helper()
	res, err := os.ReadFile(filepath.Join(s.platform, strings.TrimSuffix(s.file, ".envelope.json")+".resource.json"))
	require.NoError(t, err)
	var env map[string]any
	require.NoError(t, json.Unmarshal(s.body, &env))
	r := env["resource"].(map[string]any)
	r["ciphertext"], r["nonce"] = wechatSeal(t, res, r["associated_data"].(string))
	b, err := json.Marshal(env)
	require.NoError(t, err)
	return b
}

// payFirst pays an order the way the platform reports a payment, with a
// notification the test makes (not a sample): the setup a refund, a
// cancellation or a dispute of the sample needs.
func payFirst(t *testing.T, p *testenv.Platform, s sample, pb [4]string) {
	t.Helper()
	order, payment, cur := pb[0], pb[1], pb[3]
	amount, err := strconv.ParseInt(pb[2], 10, 64)
	require.NoError(t, err)
	var body []byte
	var h http.Header
	switch s.platform {
	case "adyen":
		live, account := "false", "MagentoMerchantTest2"
		if s.ex.config == "live" {
			live, account = "true", "TestMerchant"
		}
		sig := adyenSign(payment, "", account, order, amount, cur, "AUTHORISATION", "true")
		body = fmt.Appendf(nil, `{"live":%q,"notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":%q},`+
			`"amount":{"currency":%q,"value":%d},"eventCode":"AUTHORISATION","eventDate":"2017-01-01T10:00:00+01:00",`+
			`"merchantAccountCode":%q,"merchantReference":%q,"pspReference":%q,"success":"true"}}]}`,
			live, sig, cur, amount, account, order, payment)
		h = http.Header{"Content-Type": {"application/json"}}
	case "wechatpay":
		res := fmt.Appendf(nil, `{"mchid":"1900000100","out_trade_no":%q,"transaction_id":%q,"trade_type":"JSAPI","trade_state":"SUCCESS",`+
			`"success_time":"2018-06-01T10:00:00+08:00","amount":{"total":%d,"payer_total":%d,"currency":%q,"payer_currency":%q}}`,
			order, payment, amount, amount, cur, cur)
		ct, nonce := wechatSeal(t, res, "transaction")
		body = fmt.Appendf(nil, `{"id":"SETUP-%s","create_time":"2018-06-01T10:00:00+08:00","resource_type":"encrypt-resource",`+
			`"event_type":"TRANSACTION.SUCCESS","summary":"支付成功","resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM",`+
			`"ciphertext":%q,"associated_data":"transaction","nonce":%q}}`, payment, ct, nonce)
		h = wechatHeaders(body)
	case "shopify":
		_, name, _ := strings.Cut(order, "/")
		total := fmt.Sprintf("%d.%02d", amount/100, amount%100)
		body = fmt.Appendf(nil, `{"id":%s,"name":%q,"currency":%q,"total_price":%q,"financial_status":"paid",`+
			`"processed_at":"2021-12-01T10:00:00-05:00","updated_at":"2021-12-01T10:00:00-05:00"}`, payment, name, cur, total)
		m := hmac.New(sha256.New, []byte(shopifySecret))
		m.Write(body)
		h = http.Header{"Content-Type": {"application/json"}}
		h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(m.Sum(nil)))
		h.Set("X-Shopify-Topic", "orders/paid")
		h.Set("X-Shopify-Shop-Domain", s.ex.shop)
		h.Set("X-Shopify-Webhook-Id", "setup-"+payment)
	default:
		require.FailNow(t, "no setup payment for "+s.platform)
	}
	before := maxLogID(t, p)
	a := p.Post(t, source(s.platform), body, h)
	require.Less(t, a.Status, 300, "setup payment: %s", a.Body)
	for _, id := range logIDsAfter(t, p, before) {
		p.St.WaitStatus(t, id, callback.StatusSuccess)
	}
	o := p.Order(t, order)
	require.Equal(t, "PAID", o.PaymentStatus, "setup: the order is paid")
}
