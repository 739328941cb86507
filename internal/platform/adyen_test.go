package platform_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/signature"
	"callgate/internal/testenv"
)

// Adyen's published vector (adyen-go-api-library hmacvalidator_test.go;
// PLATFORMS.md section 4).
const (
	adyenKey       = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	adyenVectorSig = "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="
	adyenOtherKey  = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// adyenItem is one NotificationRequestItem as Adyen's documentation shows
// it (amount in minor units, success as a string).
type adyenItem struct {
	PSP, Original, Account, Ref string
	Value                       int64
	Currency, Event, Success    string
	Date                        string
}

// adyenConfig is the adyen preset's keys, taking the tests' merchant
// account.
func adyenConfig(keys ...string) platform.Config {
	return platform.Config{Secrets: keys, MerchantAccounts: "OtherECOM, CallgateECOM, merchantAccount", Livemode: "false"}
}

func authorisation(psp, ref string, value int64, success string) adyenItem {
	return adyenItem{PSP: psp, Account: "CallgateECOM", Ref: ref, Value: value, Currency: "EUR",
		Event: "AUTHORISATION", Success: success, Date: "2024-05-01T12:30:00+02:00"}
}

// adyenSign is the test's own oracle: base64 HMAC-SHA256, key hex-decoded,
// over the eight fields joined by ':'.
func adyenSign(key string, it adyenItem) string {
	k, err := hex.DecodeString(key)
	if err != nil {
		panic(err)
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(strings.Join([]string{it.PSP, it.Original, it.Account, it.Ref, strconv.FormatInt(it.Value, 10),
		it.Currency, it.Event, it.Success}, ":")))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// json renders the item with signature sig, as the object inside
// {"NotificationRequestItem": ...}.
func (it adyenItem) json(sig string) string {
	obj := map[string]any{
		"additionalData":      map[string]any{"hmacSignature": sig, "authCode": "065696"},
		"amount":              map[string]any{"currency": it.Currency, "value": it.Value},
		"eventCode":           it.Event,
		"eventDate":           it.Date,
		"merchantAccountCode": it.Account,
		"merchantReference":   it.Ref,
		"operations":          []string{"CANCEL", "CAPTURE", "REFUND"},
		"paymentMethod":       "visa",
		"pspReference":        it.PSP,
		"reason":              "065696:1111:03/2030",
		"success":             it.Success,
	}
	if it.Original != "" {
		obj["originalReference"] = it.Original
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// adyenBody is a notification holding items, each already rendered.
func adyenBody(items ...string) []byte {
	entries := make([]string, len(items))
	for i, it := range items {
		entries[i] = `{"NotificationRequestItem":` + it + `}`
	}
	return []byte(`{"live":"false","notificationItems":[` + strings.Join(entries, ",") + `]}`)
}

// adyenSigned is a notification of items signed with key.
func adyenSigned(key string, items ...adyenItem) []byte {
	rendered := make([]string, len(items))
	for i, it := range items {
		rendered[i] = it.json(adyenSign(key, it))
	}
	return adyenBody(rendered...)
}

func jsonHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return h
}

func newAdyen(t testing.TB, keys ...string) platform.Platform {
	t.Helper()
	p, err := platform.New("adyen", adyenConfig(keys...))
	require.NoError(t, err)
	return p
}

func TestAdyenPublishedVector(t *testing.T) {
	t.Parallel()
	fields := []string{"pspReference", "originalReference", "merchantAccount", "reference", "1000", "EUR", "EVENT", "true"}
	sig, err := signature.SignFields(adyenKey, ":", fields...)
	require.NoError(t, err)
	require.Equal(t, adyenVectorSig, sig, "the block")
	vector := adyenItem{PSP: "pspReference", Original: "originalReference", Account: "merchantAccount", Ref: "reference",
		Value: 1000, Currency: "EUR", Event: "EVENT", Success: "true"}
	require.Equal(t, adyenVectorSig, adyenSign(adyenKey, vector), "the test's oracle")

	p := newAdyen(t, adyenKey)
	cbs, err := p.Read(platform.Request{Body: adyenBody(vector.json(adyenVectorSig)), Now: time.Now()})
	require.NoError(t, err, "the preset reads the published vector")
	require.Equal(t, []platform.Callback{{EventID: "pspReference:EVENT:true", BusinessKey: "reference",
		Event: callback.PaymentEvent{Ignored: "adyen eventCode EVENT (success true) changes no payment"}}}, cbs)

	for name, it := range map[string]adyenItem{
		"amount":            func() adyenItem { v := vector; v.Value = 1001; return v }(),
		"originalReference": func() adyenItem { v := vector; v.Original = ""; return v }(),
		"success":           func() adyenItem { v := vector; v.Success = "false"; return v }(),
	} {
		_, err := p.Read(platform.Request{Body: adyenBody(it.json(adyenVectorSig))})
		require.ErrorIs(t, err, signature.ErrMismatch, name)
		require.True(t, platform.IsUnauthenticated(err), name)
	}
}

func TestAdyenRotation(t *testing.T) {
	t.Parallel()
	it := authorisation("8816000000000001", "ORD-AD-R", 1000, "true")
	p := newAdyen(t, "", adyenOtherKey, adyenKey) // an unset variable, then old and new
	for _, key := range []string{adyenKey, adyenOtherKey} {
		cbs, err := p.Read(platform.Request{Body: adyenSigned(key, it)})
		require.NoError(t, err)
		require.Len(t, cbs, 1)
	}
	_, err := newAdyen(t, adyenKey).Read(platform.Request{Body: adyenSigned(adyenOtherKey, it)})
	require.ErrorIs(t, err, signature.ErrMismatch)
	require.NotContains(t, err.Error(), adyenKey)
}

func TestAdyenPaysTheOrder(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	p.CreateOrder(t, "ORD-AD-1", 1000, "EUR")
	body := adyenSigned(adyenKey, authorisation("8816000000000011", "ORD-AD-1", 1000, "true"))

	a := p.Post(t, "adyen", body, jsonHeader())
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	require.Equal(t, "[accepted]", string(a.Body), "Adyen's acknowledgement")

	row := p.Settled(t, "adyen", "8816000000000011:AUTHORISATION:true")
	require.Equal(t, "ORD-AD-1", row.BusinessKey)
	require.Equal(t, body, row.Payload, "the raw body is stored byte for byte")
	var ev callback.PaymentEvent
	require.NoError(t, json.Unmarshal(row.Normalized, &ev))
	paid := time.Date(2024, 5, 1, 10, 30, 0, 0, time.UTC)
	require.Equal(t, callback.PaymentEvent{OrderCode: "ORD-AD-1", PaymentNo: "8816000000000011", Amount: 1000, Currency: "EUR",
		Status: callback.PaymentSuccess, PaidAt: &paid}, ev)
	o := p.Order(t, "ORD-AD-1")
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Equal(t, "8816000000000011", *o.PaymentNo)

	again := p.Post(t, "adyen", body, jsonHeader())
	require.Equal(t, http.StatusOK, again.Status)
	require.Equal(t, "[accepted]", string(again.Body), "a resend is acknowledged so Adyen stops")
	require.Equal(t, 1, p.Callbacks(t, "adyen"), "a resend is a duplicate")
}

func TestAdyenFailedAndOtherEvents(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	p.CreateOrder(t, "ORD-AD-2", 2500, "EUR")
	failed := adyenSigned(adyenKey, authorisation("8816000000000021", "ORD-AD-2", 2500, "false"))
	require.Equal(t, http.StatusOK, p.Post(t, "adyen", failed, jsonHeader()).Status)
	p.Settled(t, "adyen", "8816000000000021:AUTHORISATION:false")
	require.Equal(t, payment.OrderPaymentFailed, p.Order(t, "ORD-AD-2").PaymentStatus)

	capture := authorisation("8816000000000022", "ORD-AD-2", 2500, "true")
	capture.Event, capture.Original = "CAPTURE", "8816000000000021"
	a := p.Post(t, "adyen", adyenSigned(adyenKey, capture), jsonHeader())
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	row := p.Settled(t, "adyen", "8816000000000022:CAPTURE:true")
	require.Contains(t, p.LastNote(t, row.ID), "CAPTURE", "the attempt says why nothing changed")
	require.Equal(t, payment.OrderPaymentFailed, p.Order(t, "ORD-AD-2").PaymentStatus, "no business effect")
}

func TestAdyenSeveralItems(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	p.CreateOrder(t, "ORD-AD-3", 300, "EUR")
	p.CreateOrder(t, "ORD-AD-4", 400, "EUR")
	first := authorisation("8816000000000031", "ORD-AD-3", 300, "true")
	second := authorisation("8816000000000041", "ORD-AD-4", 400, "true")

	// One forged item refuses the request whole.
	forged := adyenBody(first.json(adyenSign(adyenKey, first)), second.json(adyenSign(adyenOtherKey, second)))
	a := p.Post(t, "adyen", forged, jsonHeader())
	require.Equal(t, http.StatusUnauthorized, a.Status, string(a.Body))
	require.Contains(t, string(a.Body), "notificationItems[1]")
	require.Zero(t, p.Callbacks(t, "adyen"), "nothing of a refused request is stored")

	a = p.Post(t, "adyen", adyenSigned(adyenKey, first, second), jsonHeader())
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	require.Equal(t, "[accepted]", string(a.Body))
	p.Settled(t, "adyen", "8816000000000031:AUTHORISATION:true")
	p.Settled(t, "adyen", "8816000000000041:AUTHORISATION:true")
	require.Equal(t, 2, p.Callbacks(t, "adyen"), "one row per item")
	require.Equal(t, payment.OrderPaid, p.Order(t, "ORD-AD-3").PaymentStatus)
	require.Equal(t, payment.OrderPaid, p.Order(t, "ORD-AD-4").PaymentStatus)
}

func TestAdyenRefusals(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	p.CreateOrder(t, "ORD-AD-9", 900, "EUR")
	it := authorisation("8816000000000091", "ORD-AD-9", 900, "true")
	sig := adyenSign(adyenKey, it)
	tampered := it
	tampered.Value = 1
	cases := map[string][]byte{
		"wrong signature": adyenBody(it.json(sig[:len(sig)-5] + "AAAA=")),
		"tampered body":   adyenBody(tampered.json(sig)),
		"wrong key":       adyenSigned(adyenOtherKey, it),
		"no signature":    adyenBody(it.json("")),
	}
	for name, body := range cases {
		a := p.Post(t, "adyen", body, jsonHeader())
		require.Equal(t, http.StatusUnauthorized, a.Status, "%s: %s", name, a.Body)
		var refusal struct{ Error string }
		require.NoError(t, json.Unmarshal(a.Body, &refusal), name)
		require.Contains(t, refusal.Error, "invalid signature", name)
		require.Contains(t, refusal.Error, "hmacSignature", name)
		require.NotContains(t, refusal.Error, sig, name)
	}
	require.Zero(t, p.Callbacks(t, "adyen"), "nothing refused is stored")
	require.Equal(t, payment.OrderUnpaid, p.Order(t, "ORD-AD-9").PaymentStatus)
}

// TestAdyenConfiguration: the shipped source reads ADYEN_HMAC_KEY (or
// ADYEN_HMAC_KEY_FILE), and a key that is not hex is refused at start-up,
// naming the source and the field.
func TestAdyenConfiguration(t *testing.T) {
	shipped := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	index := func(cfg *config.Config) int {
		for i, s := range cfg.Sources {
			if s.Name == "adyen" {
				return i
			}
		}
		t.Fatal("no adyen source in the shipped configuration")
		return -1
	}

	t.Setenv("ADYEN_HMAC_KEY", "")
	t.Setenv("ADYEN_MERCHANT_ACCOUNTS", "CallgateECOM")
	cfg, err := config.Load(shipped, kinds.Names())
	require.NoError(t, err)
	require.True(t, cfg.Sources[index(cfg)].Disabled(), "without a key the source is disabled")

	file := filepath.Join(t.TempDir(), "adyen.key")
	require.NoError(t, os.WriteFile(file, []byte(adyenKey+"\n"), 0o600))
	t.Setenv("ADYEN_HMAC_KEY_FILE", file)
	cfg, err = config.Load(shipped, kinds.Names())
	require.NoError(t, err)
	src := cfg.Sources[index(cfg)]
	require.False(t, src.Disabled())
	require.Equal(t, []string{adyenKey}, src.Platform.Secrets, "the key is read from ADYEN_HMAC_KEY_FILE")

	t.Setenv("ADYEN_HMAC_KEY", "whsec_this-is-not-a-hex-key")
	_, err = config.Load(shipped, kinds.Names())
	require.Error(t, err)
	require.Contains(t, err.Error(), fmt.Sprintf("sources[%d] (adyen).platform.secrets[0]: the Adyen HMAC key is not hex", index(cfg)))
	require.NotContains(t, err.Error(), "this-is-not-a-hex-key", "the key is not repeated")

	_, err = platform.New("adyen", platform.Config{Secrets: []string{adyenKey, "0AB"}, OrderPath: "x", MerchantAccounts: "A"})
	require.ErrorContains(t, err, "platform.order_path: does not apply to preset adyen")
	_, err = platform.New("adyen", platform.Config{Secrets: []string{adyenKey, "0AB"}, MerchantAccounts: "A"})
	require.ErrorContains(t, err, "platform.secrets[1]: the Adyen HMAC key is not hex")
	_, err = platform.New("adyen", platform.Config{Secrets: []string{adyenKey}})
	require.ErrorContains(t, err, "platform.merchant_accounts: is required (ADYEN_MERCHANT_ACCOUNTS)")
}

func BenchmarkAdyenRead(b *testing.B) {
	p := newAdyen(b, adyenKey)
	req := platform.Request{Body: adyenSigned(adyenKey, authorisation("8816000000000011", "ORD-AD-1", 1000, "true")),
		Header: jsonHeader(), Now: time.Now()}
	benchRead(b, p, req)
}

// FuzzAdyenRead: Read never panics on any body, nor on a correctly signed
// item of any field values, and what it accepts is callbacks the intake
// can store.
func FuzzAdyenRead(f *testing.F) {
	capture := authorisation("8816000000000022", "ORD-F", 10, "true")
	capture.Event = "CAPTURE"
	f.Add(adyenSigned(adyenKey, authorisation("8816000000000011", "ORD-F", 1000, "true")), "8816000000000011", "ORD-F", "AUTHORISATION", "true", int64(1000))
	f.Add(adyenSigned(adyenKey, authorisation("8816000000000012", "ORD-F", 0, "false"), capture), "", "", "", "", int64(0))
	f.Add(adyenBody(adyenItem{PSP: "pspReference", Original: "originalReference", Account: "merchantAccount", Ref: "reference",
		Value: 1000, Currency: "EUR", Event: "EVENT", Success: "true"}.json(adyenVectorSig)), "p", "r", "REFUND", "false", int64(-1))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"amount":{"value":1e3}}}]}`), ":", "\xff", "AUTHORISATION", "TRUE", int64(1))
	f.Add([]byte(`{"notificationItems":{}}`), "p", "", "AUTHORISATION", "true", int64(5))
	f.Add([]byte("\xff"), "p", "r", "", "true", int64(5))
	p := newAdyen(f, adyenKey)
	f.Fuzz(func(t *testing.T, body []byte, psp, ref, event, success string, value int64) {
		it := authorisation(psp, ref, value, success)
		it.Event = event
		for _, b := range [][]byte{body, adyenSigned(adyenKey, it)} {
			cbs, err := p.Read(platform.Request{Body: b, Header: jsonHeader(), Now: time.Now()})
			if err != nil {
				continue
			}
			require.NotEmpty(t, cbs)
			require.LessOrEqual(t, len(cbs), platform.AdyenMaxItems)
			for _, cb := range cbs {
				requireCanonical(t, cb)
			}
		}
	})
}

// requireCanonical: a callback a preset read is either unreadable, with
// its reason, or an event the payment handler can decide.
func requireCanonical(t *testing.T, cb platform.Callback) {
	t.Helper()
	require.NotEmpty(t, cb.EventID)
	require.NotEmpty(t, cb.BusinessKey)
	if cb.Unreadable != "" {
		require.Nil(t, cb.Event)
		return
	}
	require.NoError(t, payment.Validate(cb.Event.(callback.PaymentEvent)))
}

// TestAdyenHostile: broken and hostile requests are refused with callgate's
// JSON error, nothing is stored, and the gateway still takes a valid one.
func TestAdyenHostile(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	p.CreateOrder(t, "ORD-AD-H", 1000, "EUR")
	valid := authorisation("8816000000000099", "ORD-AD-H", 1000, "true")
	good := adyenSigned(adyenKey, valid)
	replace := func(old, new string) []byte {
		require.Contains(t, string(good), old)
		return []byte(strings.Replace(string(good), old, new, 1))
	}
	repeat := func(n int, item string) []byte {
		items := make([]string, n)
		for i := range items {
			items[i] = item
		}
		return adyenBody(items...)
	}
	signedItems := make([]adyenItem, platform.AdyenMaxItems+1)
	for i := range signedItems {
		signedItems[i] = authorisation(fmt.Sprintf("88160000%08d", i), "ORD-AD-H", 1000, "true")
	}
	longPSP, longRef := valid, valid
	longPSP.PSP = strings.Repeat("8", 300)
	longRef.PSP, longRef.Ref = "8816000000000098", strings.Repeat("R", 5000)
	var noSignature map[string]any
	require.NoError(t, json.Unmarshal([]byte(valid.json("x")), &noSignature))
	delete(noSignature, "additionalData")
	unsigned, _ := json.Marshal(noSignature)

	cases := []struct {
		name   string
		body   []byte
		status int
		reason string
	}{
		{"truncated JSON", good[:len(good)/2], 400, "not an Adyen notification"},
		{"not JSON", []byte("[accepted]"), 400, "not an Adyen notification"},
		{"empty body", nil, 400, "not an Adyen notification"},
		{"notificationItems missing", []byte(`{"live":"false"}`), 400, "notificationItems is missing"},
		{"notificationItems empty", []byte(`{"live":"false","notificationItems":[]}`), 400, "notificationItems is empty"},
		{"notificationItems not an array", []byte(`{"notificationItems":{"NotificationRequestItem":{}}}`), 400, "must be an array"},
		{"10,000 items", repeat(10000, "{}"), 400, "at most 100 are read per request"},
		{"101 signed items", adyenSigned(adyenKey, signedItems...), 400, "at most 100 are read per request"},
		{"item not an object", []byte(`{"notificationItems":[1]}`), 400, "notificationItems[0]"},
		{"NotificationRequestItem missing", []byte(`{"notificationItems":[{}]}`), 400, "NotificationRequestItem is missing"},
		{"hmacSignature missing", adyenBody(string(unsigned)), 401, "additionalData.hmacSignature"},
		{"non-UTF-8 bytes", replace("ORD-AD-H", "ORD-\xff\xfe"), 400, "UTF-8"},
		{"success a boolean", replace(`"success":"true"`, `"success":true`), 400, "success has the wrong JSON type"},
		{"amount.value a decimal", replace(`"value":1000`, `"value":10.00`), 400, "amount.value must be an integer"},
		{"amount.value a string", replace(`"value":1000`, `"value":"1000"`), 400, "amount.value must be an integer"},
		{"huge number", replace(`"value":1000`, `"value":1`+strings.Repeat("0", 60)), 400, "JSON number longer"},
		{"deep nesting", replace(`"live":"false"`, `"live":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)), 400, "nesting"},
		{"huge pspReference", adyenSigned(adyenKey, longPSP), 400, "event id is longer"},
		{"over the size limit", append(append([]byte(nil), good[:len(good)-2]...), []byte(`,"pad":"`+strings.Repeat("x", 2<<20)+`"}`)...), 413, "size limit"},
	}
	for _, c := range cases {
		a := p.Post(t, "adyen", c.body, jsonHeader())
		require.Equal(t, c.status, a.Status, "%s: %s", c.name, a.Body)
		var refusal struct{ Error string }
		require.NoError(t, json.Unmarshal(a.Body, &refusal), "%s: callgate's JSON error", c.name)
		require.Contains(t, refusal.Error, c.reason, c.name)
	}
	require.Zero(t, p.Callbacks(t, "adyen"), "nothing refused is stored")

	// Signed and ours, but no order can have that merchantReference: kept
	// under its event id, FAILED with the reason, answered so Adyen stops.
	a := p.Post(t, "adyen", adyenSigned(adyenKey, longRef), jsonHeader())
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	row := p.St.WaitStatus(t, logIDOf(t, p, "adyen", longRef.PSP+":AUTHORISATION:true"), callback.StatusFailed)
	require.Equal(t, longRef.PSP+":AUTHORISATION:true", row.BusinessKey)
	require.Equal(t, "the notification could not be read: merchantReference is longer than 191 characters", *row.LastError)

	a = p.Post(t, "adyen", good, jsonHeader())
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	p.Settled(t, "adyen", "8816000000000099:AUTHORISATION:true")
	require.Equal(t, payment.OrderPaid, p.Order(t, "ORD-AD-H").PaymentStatus)
}

// TestAdyenItemsKeepTheirOrder: the items of one request get log ids in
// the order they come, so those of one order are processed in that order.
func TestAdyenItemsKeepTheirOrder(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	var items []adyenItem
	for i := range 8 {
		it := authorisation(fmt.Sprintf("88160000000005%02d", i), "ORD-AD-ORDER", 100, "false")
		it.Event = "CAPTURE"
		items = append(items, it)
	}
	a := p.Post(t, "adyen", adyenSigned(adyenKey, items...), jsonHeader())
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	var events []string
	require.NoError(t, p.St.DB.Table("callback_log").Where("source = ?", "adyen").Order("id").Pluck("event_id", &events).Error)
	want := make([]string, len(items))
	for i, it := range items {
		want[i] = it.PSP + ":CAPTURE:false"
	}
	require.Equal(t, want, events, "log ids follow the items' order")
}

// TestAdyenLiveFlag: the body's live must equal the source's livemode
// (ADYEN_LIVE, default true): a test-environment notification sent to a
// live source is refused (403) and not stored, and so is a live one sent
// to a test source.
func TestAdyenLiveFlag(t *testing.T) {
	live, err := platform.New("adyen", platform.Config{Secrets: []string{adyenKey}, MerchantAccounts: "CallgateECOM"})
	require.NoError(t, err)
	body := adyenSigned(adyenKey, authorisation("PSP-LIVE", "ORD-LIVE", 1000, "true")) // "live":"false"
	_, err = live.Read(platform.Request{Header: jsonHeader(), Body: body, Now: time.Now()})
	require.True(t, platform.IsForeignMerchant(err), "a test notification on a live source: %v", err)
	require.ErrorContains(t, err, `live "false" is not this source's`)

	test := newAdyen(t, adyenKey) // livemode false
	liveBody := bytes.Replace(body, []byte(`"live":"false"`), []byte(`"live":"true"`), 1)
	_, err = test.Read(platform.Request{Header: jsonHeader(), Body: liveBody, Now: time.Now()})
	require.True(t, platform.IsForeignMerchant(err), "a live notification on a test source: %v", err)
	_, err = test.Read(platform.Request{Header: jsonHeader(), Body: body, Now: time.Now()})
	require.NoError(t, err)

	_, err = platform.New("adyen", platform.Config{Secrets: []string{adyenKey}, MerchantAccounts: "A", Livemode: "yes"})
	require.ErrorContains(t, err, `platform.livemode: "yes" is neither true nor false (ADYEN_LIVE)`)
}

// TestAdyenFailureOfThePayingPayment: an AUTHORISATION success=false for
// the pspReference that paid the order, dated after its success, is never
// "already applied": the order stays PAID and payment.exception
// reversal_of_paying_payment tells a person. A CHARGEBACK of that payment
// is debited but still defendable (Adyen's dispute flow): the dispute is
// OPEN; once its defence period ended it is LOST (points deducted, the
// warehouse told to cancel).
func TestAdyenFailureOfThePayingPayment(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	p.CreateOrder(t, "ORD-AD-REV", 1000, "EUR")
	post := func(it adyenItem) {
		t.Helper()
		a := p.Post(t, "adyen", adyenSigned(adyenKey, it), jsonHeader())
		require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	}
	post(authorisation("PSP-REV", "ORD-AD-REV", 1000, "true"))
	p.Settled(t, "adyen", "PSP-REV:AUTHORISATION:true")
	failed := authorisation("PSP-REV", "ORD-AD-REV", 1000, "false")
	failed.Date = "2024-05-01T13:00:00+02:00"
	post(failed)
	row := p.Settled(t, "adyen", "PSP-REV:AUTHORISATION:false")
	require.Equal(t, "exception reversal_of_paying_payment: payment PSP-REV failed after it paid the order", p.LastNote(t, row.ID))
	require.Equal(t, []string{
		`payment.exception {"amount":1000,"currency":"EUR","kind":"reversal_of_paying_payment","orderCode":"ORD-AD-REV","paymentNo":"PSP-REV"}`,
	}, outboxOf(t, p, row.ID))
	require.Equal(t, payment.OrderPaid, p.Order(t, "ORD-AD-REV").PaymentStatus)

	cb := adyenItem{PSP: "PSP-CB", Original: "PSP-REV", Account: "CallgateECOM", Ref: "ORD-AD-REV", Value: 1000, Currency: "EUR",
		Event: "CHARGEBACK", Success: "true", Date: "2024-05-02T12:30:00+02:00"}
	post(cb)
	row = p.Settled(t, "adyen", "PSP-CB:CHARGEBACK:true")
	require.Equal(t, []string{
		`order.dispute {"amount":1000,"currency":"EUR","disputeId":"PSP-CB","orderCode":"ORD-AD-REV","status":"OPEN"}`,
	}, outboxOf(t, p, row.ID))
	ended := cb
	ended.Event, ended.Date = "DISPUTE_DEFENSE_PERIOD_ENDED", "2024-05-20T12:30:00+02:00"
	post(ended)
	row = p.Settled(t, "adyen", "PSP-CB:DISPUTE_DEFENSE_PERIOD_ENDED:true")
	require.Equal(t, []string{
		`order.dispute {"amount":1000,"currency":"EUR","disputeId":"PSP-CB","orderCode":"ORD-AD-REV","status":"LOST"}`,
		`points.deduct {"amount":1000,"currency":"EUR","orderCode":"ORD-AD-REV","userId":7}`,
		`warehouse.cancel {"orderCode":"ORD-AD-REV"}`,
	}, outboxOf(t, p, row.ID))
	o := p.Order(t, "ORD-AD-REV")
	require.Equal(t, "LOST", *o.DisputeStatus)
}
