package differential_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"callgate/internal/callback"
	"callgate/internal/signature"
	"callgate/internal/testenv"
)

// The world a sequence plays in: orders of several currencies, shared by
// the payment sources that key on the merchant's order code, Shopify's
// orders (keyed "<shop>/<name>"), and waybills.
const (
	shop          = "diff-shop.myshopify.com"
	foreignShop   = "elsewhere.myshopify.com"
	alipayApp     = "2021000000000042"
	alipaySeller  = "2088000000000042"
	wechatMch     = "1230000109"
	wechatApp     = "wxdiff00000000001"
	wechatKey     = "callgate0diff0apiv3key0032bytes!"
	wechatKeyID   = "PUB_KEY_ID_0000000000000000000000000042"
	adyenKey      = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	adyenAccount  = "CallgateECOM"
	stripeSecret  = "whsec_callgate_differential"
	shopifySecret = "shpss_callgate_differential"
	kuaidiSalt    = "callgate-differential-salt"
)

// order is one orders row of the world.
type order struct {
	Code     string
	User     int64
	Amount   int64
	Currency string
}

// payment is one payment notification, before a platform words it.
type payment struct {
	Source    string // paydemo, stripe, adyen, wechatpay, alipay, shopify
	Seq       int    // its number in the sequence: event ids derive from it
	Order     string // order code as the platform names it (Shopify: the name)
	PaymentNo string
	Amount    int64  // minor units of Currency
	Received  int64  // Stripe: what the PaymentIntent received (a success pays on it)
	Currency  string // "" (paydemo only): the order's
	Status    string // SUCCESS, FAILED, or "" with Ignored
	Ignored   bool   // neither a payment nor a failure (another event type)
	Foreign   bool   // for another merchant: refused at intake
	Poison    bool   // an invalid payload (paydemo): FAILED for good
	PaidAt    time.Time
}

// carrier is one carrier event.
type carrier struct {
	Source     string // shipdemo or kuaidi100
	Waybill    string
	Order      string // shipdemo only; "" when the carrier does not know it
	Seq        int64
	Status     string // shipdemo: a carrier status; kuaidi100: from State
	State      int    // kuaidi100's lastResult.state
	Location   string
	OccurredAt time.Time
}

// step is one request of a sequence: a payment or a carrier event, or a
// platform's resend of an earlier step.
type step struct {
	Pay    *payment
	Ship   *carrier
	Resend bool
}

// world is a generated sequence and what it starts from.
type world struct {
	Orders []order
	Steps  []step
}

var currencies = []string{"CNY", "USD", "JPY", "KWD", "EUR"}

// generate makes a sequence from seed: payments SUCCESS and FAILED,
// resends, second payments, amount and currency mismatches, unknown
// orders, foreign merchants, events of no effect, poison, and carrier
// events in and out of order, over a few orders and waybills so that they
// meet.
func generate(seed int64, n int) world {
	r := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	var w world
	for i := range 10 {
		w.Orders = append(w.Orders, order{Code: fmt.Sprintf("D-%d", i), User: int64(100 + i),
			Amount: int64(1 + r.IntN(500000)), Currency: currencies[r.IntN(len(currencies))]})
	}
	for i := range 4 {
		w.Orders = append(w.Orders, order{Code: shop + "/S-" + strconv.Itoa(i), User: int64(200 + i),
			Amount: int64(1 + r.IntN(500000)), Currency: currencies[r.IntN(len(currencies))]})
	}
	find := func(code string) *order {
		for i := range w.Orders {
			if w.Orders[i].Code == code {
				return &w.Orders[i]
			}
		}
		return nil
	}
	var sent []int // indexes of steps that can be resent
	paymentsOf := map[string][]string{}
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i := range n {
		if len(sent) > 0 && r.IntN(10) == 0 {
			prev := w.Steps[sent[r.IntN(len(sent))]]
			prev.Resend = true
			w.Steps = append(w.Steps, prev)
			continue
		}
		if r.IntN(3) == 0 {
			c := carrier{Waybill: "WB-" + strconv.Itoa(r.IntN(5)), Seq: int64(1 + r.IntN(6)),
				OccurredAt: base.Add(time.Duration(i) * time.Minute)}
			if r.IntN(2) == 0 {
				c.Source = "shipdemo"
				c.Status = []string{callback.CarrierPickedUp, callback.CarrierInTransit, callback.CarrierOutForDelivery,
					callback.CarrierDelivered, callback.CarrierException}[r.IntN(5)]
				if r.IntN(2) == 0 {
					c.Order = "D-" + strconv.Itoa(r.IntN(10))
				}
				c.Location = []string{"Hamburg", "Lyon", "Porto"}[r.IntN(3)]
			} else {
				c.Source = "kuaidi100"
				c.State = []int{0, 1, 2, 3, 5, 8, 14}[r.IntN(7)]
				c.Location = []string{"上海市", "浙江省,杭州市", "广东省,深圳市"}[r.IntN(3)]
			}
			w.Steps = append(w.Steps, step{Ship: &c})
			sent = append(sent, len(w.Steps)-1)
			continue
		}
		p := payment{Seq: i, Source: []string{"paydemo", "paydemo", "stripe", "adyen", "wechatpay", "alipay", "shopify"}[r.IntN(7)],
			Status: callback.PaymentSuccess, PaidAt: base.Add(time.Duration(i) * time.Second)}
		if p.Source == "shopify" {
			p.Order = "S-" + strconv.Itoa(r.IntN(5)) // S-4 is no order
		} else {
			p.Order = "D-" + strconv.Itoa(r.IntN(12)) // D-10 and D-11 are no orders
		}
		code := p.Order
		if p.Source == "shopify" {
			code = shop + "/" + p.Order
		}
		o := find(code)
		if o != nil {
			p.Amount, p.Currency = o.Amount, o.Currency
		} else {
			p.Amount, p.Currency = int64(1+r.IntN(9999)), currencies[r.IntN(len(currencies))]
		}
		switch roll := r.IntN(20); {
		case roll < 2:
			p.Amount += int64(1 + r.IntN(100)) // amount mismatch
		case roll < 4:
			p.Currency = currencies[(slices.Index(currencies, p.Currency)+1+r.IntN(len(currencies)-1))%len(currencies)]
		}
		if p.Source == "alipay" && p.Currency == "KWD" && r.IntN(2) == 0 {
			p.Currency = "CNY"
		}
		if p.Source == "paydemo" && o != nil && p.Currency == o.Currency && r.IntN(3) == 0 {
			p.Currency = "" // a configured source without a currency: the order's
		}
		if r.IntN(4) == 0 && p.Source != "shopify" {
			p.Status = callback.PaymentFailed
		}
		p.Received = p.Amount
		if p.Source == "stripe" && p.Amount > 1 && r.IntN(5) == 0 {
			p.Received = 1 + r.Int64N(p.Amount-1) // a partial receipt never pays the whole order
		}
		prev := paymentsOf[code]
		if len(prev) > 0 && r.IntN(3) == 0 {
			p.PaymentNo = prev[r.IntN(len(prev))] // the same payment again, under a new event
		} else {
			p.PaymentNo = fmt.Sprintf("PAY-%d", i)
			paymentsOf[code] = append(paymentsOf[code], p.PaymentNo)
		}
		switch roll := r.IntN(30); {
		case roll < 2:
			p.Ignored, p.Status = true, ""
		case roll < 4 && p.Source != "paydemo": // the demo source binds no merchant
			p.Foreign = true
		case roll < 5 && p.Source == "paydemo":
			p.Poison = true
		}
		w.Steps = append(w.Steps, step{Pay: &p})
		if !p.Foreign {
			sent = append(sent, len(w.Steps)-1)
		}
	}
	return w
}

// request is one HTTP request to POST /callbacks/{Source}.
type request struct {
	Source string
	Body   []byte
	Header http.Header
}

// eventID is the event id the intake will find for a step (its
// idempotency key with the source).
func (s step) eventID() string {
	if c := s.Ship; c != nil {
		if c.Source == "shipdemo" {
			return c.Waybill + ":" + strconv.FormatInt(c.Seq, 10)
		}
		return c.Waybill + ":" + strconv.FormatInt(c.Seq, 10) + ":" + strconv.Itoa(c.State)
	}
	p := s.Pay
	switch p.Source {
	case "paydemo":
		return fmt.Sprintf("msg-%d", p.Seq)
	case "stripe":
		return fmt.Sprintf("evt_%d", p.Seq)
	case "adyen":
		code := "AUTHORISATION"
		if p.Ignored {
			code = "CAPTURE"
		}
		return fmt.Sprintf("PSP-%d:%s:%t", p.Seq, code, p.Status != callback.PaymentFailed)
	case "wechatpay":
		return fmt.Sprintf("EV-%d", p.Seq)
	case "alipay":
		return fmt.Sprintf("notify-%d", p.Seq)
	case "shopify":
		topic := "orders/paid"
		if p.Ignored {
			topic = "orders/updated"
		}
		return fmt.Sprintf("%d:%s:%s", 9000+p.Seq, topic, p.PaidAt.Format(time.RFC3339))
	}
	panic("no source " + p.Source)
}

// source is the step's source.
func (s step) source() string {
	if s.Ship != nil {
		return s.Ship.Source
	}
	return s.Pay.Source
}

// digits are the ISO 4217 exponents of the world's currencies, written
// here rather than taken from the code under test.
var digits = map[string]int{"CNY": 2, "USD": 2, "JPY": 0, "KWD": 3, "EUR": 2}

// decimal writes minor units of currency as the platform's decimal amount.
func decimal(minor int64, currency string) string {
	d := digits[currency]
	if d == 0 {
		return strconv.FormatInt(minor, 10)
	}
	s := fmt.Sprintf("%0*d", d+1, minor)
	return s[:len(s)-d] + "." + s[len(s)-d:]
}

var chinaTime = time.FixedZone("UTC+8", 8*3600)

// render words a step as its platform does, signed with the sources'
// keys, at now.
func render(s step, rsaKey *rsa.PrivateKey, paydemoSecret, shipdemoSecret string, now time.Time) request {
	if c := s.Ship; c != nil {
		if c.Source == "shipdemo" {
			ev := map[string]any{"waybillNo": c.Waybill, "seq": c.Seq, "status": c.Status, "location": c.Location,
				"occurredAt": c.OccurredAt.Format(time.RFC3339)}
			if c.Order != "" {
				ev["orderCode"] = c.Order
			}
			body := mustJSON(ev)
			return request{"shipdemo", body, http.Header{"Content-Type": {"application/json"},
				"X-Signature": {signature.SignHMAC(shipdemoSecret, body, "hex", "")}}}
		}
		data := make([]map[string]any, c.Seq)
		for i := range data {
			at := c.OccurredAt.Add(-time.Duration(i) * time.Hour).In(chinaTime).Format("2006-01-02 15:04:05")
			data[i] = map[string]any{"context": "第" + strconv.Itoa(int(c.Seq)-i) + "站", "time": at, "ftime": at, "areaName": c.Location}
		}
		param := string(mustJSON(map[string]any{"status": "polling", "message": "", "lastResult": map[string]any{
			"message": "ok", "nu": c.Waybill, "state": strconv.Itoa(c.State), "com": "yuantong", "data": data}}))
		form := url.Values{"param": {param}, "sign": {signature.SignMD5Salt(param, kuaidiSalt)}}
		return request{"kuaidi100", []byte(form.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}
	}
	p := s.Pay
	id := s.eventID()
	status := p.Status
	switch p.Source {
	case "paydemo":
		ev := map[string]any{"orderCode": p.Order, "paymentNo": p.PaymentNo, "amount": p.Amount, "status": status,
			"paidAt": p.PaidAt.Format(time.RFC3339)}
		if p.Currency != "" {
			ev["currency"] = p.Currency
		}
		if p.Ignored {
			ev = map[string]any{"orderCode": p.Order, "ignored": "payment " + p.PaymentNo + " is pending"}
		}
		if p.Poison {
			ev["status"] = "MAYBE"
		}
		body := mustJSON(ev)
		sig, err := signature.SignStandardWebhooks(paydemoSecret, id, now, body)
		if err != nil {
			panic(err)
		}
		return request{"paydemo", body, http.Header{"Content-Type": {"application/json"}, "webhook-id": {id},
			"webhook-timestamp": {strconv.FormatInt(now.Unix(), 10)}, "webhook-signature": {sig}}}
	case "stripe":
		typ := "payment_intent.succeeded"
		switch {
		case p.Ignored:
			typ = "payment_intent.created"
		case status == callback.PaymentFailed:
			typ = "payment_intent.payment_failed"
		}
		received := p.Received
		if status == callback.PaymentFailed {
			received = 0
		}
		body := mustJSON(map[string]any{"id": id, "object": "event", "livemode": !p.Foreign, "type": typ, "created": p.PaidAt.Unix(),
			"data": map[string]any{"object": map[string]any{"id": p.PaymentNo, "object": "payment_intent", "amount": p.Amount,
				"amount_received": received, "currency": strings.ToLower(p.Currency), "metadata": map[string]any{"order_code": p.Order}}}})
		return request{"stripe", body, http.Header{"Content-Type": {"application/json"},
			"Stripe-Signature": {signature.SignStripe(stripeSecret, now, body)}}}
	case "adyen":
		code, success := "AUTHORISATION", strconv.FormatBool(status != callback.PaymentFailed)
		if p.Ignored {
			code = "CAPTURE"
		}
		account := adyenAccount
		if p.Foreign {
			account = "SomeoneElseECOM"
		}
		value := strconv.FormatInt(p.Amount, 10)
		sig, err := signature.SignFields(adyenKey, ":", p.PaymentNoForAdyen(), "", account, p.Order, value, p.Currency, code, success)
		if err != nil {
			panic(err)
		}
		item := map[string]any{"pspReference": p.PaymentNoForAdyen(), "merchantAccountCode": account, "merchantReference": p.Order,
			"amount": map[string]any{"value": p.Amount, "currency": p.Currency}, "eventCode": code, "success": success,
			"eventDate": p.PaidAt.Format(time.RFC3339), "additionalData": map[string]any{"hmacSignature": sig}}
		body := mustJSON(map[string]any{"live": "false", "notificationItems": []any{map[string]any{"NotificationRequestItem": item}}})
		return request{"adyen", body, http.Header{"Content-Type": {"application/json"}}}
	case "wechatpay":
		state := "SUCCESS"
		switch {
		case p.Ignored:
			state = "NOTPAY"
		case status == callback.PaymentFailed:
			state = "PAYERROR"
		}
		mch := wechatMch
		if p.Foreign {
			mch = "1900000999"
		}
		plain := mustJSON(map[string]any{"mchid": mch, "appid": wechatApp, "out_trade_no": p.Order, "transaction_id": p.PaymentNo,
			"trade_state": state, "success_time": p.PaidAt.In(chinaTime).Format(time.RFC3339),
			"amount": map[string]any{"total": p.Amount, "currency": p.Currency}})
		block, _ := aes.NewCipher([]byte(wechatKey))
		gcm, _ := cipher.NewGCM(block)
		nonce := fmt.Sprintf("%012d", p.Seq)
		body := mustJSON(map[string]any{"id": id, "event_type": "TRANSACTION.SUCCESS", "resource_type": "encrypt-resource",
			"resource": map[string]any{"original_type": "transaction", "algorithm": "AEAD_AES_256_GCM", "associated_data": "transaction",
				"nonce": nonce, "ciphertext": base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plain, []byte("transaction")))}})
		ts, wnonce := strconv.FormatInt(now.Unix(), 10), "n"+strconv.Itoa(p.Seq)
		return request{"wechatpay", body, http.Header{"Content-Type": {"application/json"}, "Wechatpay-Serial": {wechatKeyID},
			"Wechatpay-Timestamp": {ts}, "Wechatpay-Nonce": {wnonce},
			"Wechatpay-Signature": {testenv.SignSHA256WithRSA(rsaKey, []byte(ts+"\n"+wnonce+"\n"+string(body)+"\n"))}}}
	case "alipay":
		trade := "TRADE_SUCCESS"
		switch {
		case p.Ignored:
			trade = "WAIT_BUYER_PAY"
		case status == callback.PaymentFailed:
			trade = "TRADE_CLOSED"
		}
		app := alipayApp
		if p.Foreign {
			app = "2021000000000999"
		}
		params := [][2]string{{"app_id", app}, {"seller_id", alipaySeller}, {"notify_id", id}, {"out_trade_no", p.Order},
			{"trade_no", p.PaymentNo}, {"trade_status", trade}, {"total_amount", decimal(p.Amount, p.Currency)},
			{"gmt_payment", p.PaidAt.In(chinaTime).Format("2006-01-02 15:04:05")}, {"charset", "utf-8"}}
		if p.Currency != "CNY" {
			params = append(params, [2]string{"trans_currency", p.Currency})
		}
		var content []string
		for _, kv := range params {
			content = append(content, kv[0]+"="+kv[1])
		}
		slices.Sort(content)
		form := url.Values{"sign_type": {"RSA2"}, "sign": {testenv.SignSHA256WithRSA(rsaKey, []byte(strings.Join(content, "&")))}}
		for _, kv := range params {
			form.Set(kv[0], kv[1])
		}
		return request{"alipay", []byte(form.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}}}
	case "shopify":
		topic := "orders/paid"
		if p.Ignored {
			topic = "orders/updated"
		}
		body := mustJSON(map[string]any{"id": 9000 + p.Seq, "name": p.Order, "currency": p.Currency, "total_price": decimal(p.Amount, p.Currency),
			"financial_status": "paid", "updated_at": p.PaidAt.Format(time.RFC3339)})
		domain := shop
		if p.Foreign {
			domain = foreignShop
		}
		return request{"shopify", body, http.Header{"Content-Type": {"application/json"},
			"X-Shopify-Hmac-Sha256": {signature.SignHMAC(shopifySecret, body, "base64", "")},
			"X-Shopify-Topic":       {topic}, "X-Shopify-Shop-Domain": {domain}, "X-Shopify-Webhook-Id": {"wh-" + id}}}
	}
	panic("no source " + p.Source)
}

// PaymentNoForAdyen: Adyen's pspReference is the payment and, with the
// event code and success, the event id; a new event of the same payment
// needs another reference, so Adyen's events carry their own.
func (p *payment) PaymentNoForAdyen() string { return fmt.Sprintf("PSP-%d", p.Seq) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
