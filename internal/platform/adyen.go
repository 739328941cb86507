package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Adyen (preset adyen): the standard webhook, a JSON body
// {"live":"false","notificationItems":[{"NotificationRequestItem":{...}}]}
// where each item carries its own signature in
// additionalData.hmacSignature: base64 HMAC-SHA256, keyed with the
// hex-decoded HMAC key, over the eight ':'-joined fields
// pspReference:originalReference:merchantAccountCode:merchantReference:
// amount.value:amount.currency:eventCode:success (a missing field is
// empty). Adyen sends one item per request; several are read as several
// callbacks (at most [AdyenMaxItems]), and one item that fails verification
// or reading refuses the whole request.
//
// Event id: pspReference:eventCode:success (Adyen has no event id; a resend
// carries the same three). eventCode AUTHORISATION with success "true"
// pays, "false" fails; any other eventCode (CAPTURE, REFUND, ...) is stored
// and processed without effect, the reason in the attempt's note. Order:
// merchantReference; payment: pspReference; amount: amount.value, in
// Adyen's minor units (converted to ISO 4217's where Adyen counts
// otherwise: CLP, CVE, IDR, ISK), currency amount.currency; paid at:
// eventDate when it is RFC 3339. Keys: secrets, the HMAC keys in hex (old and new during a
// rotation). Merchant: merchant_accounts (required, comma-separated): every
// item's merchantAccountCode must be one of them, or the request is
// refused (403) and nothing stored. Answer: 200 with the body [accepted] (Adyen's legacy rule;
// any 2xx satisfies the current one); refusals are callgate's JSON error.
// Adyen retries 3 times at once, then from a queue for up to 30 days.
type adyen struct {
	verifier *signature.FieldHMAC
	accounts map[string]bool // merchant account codes this source takes
}

// AdyenMaxItems bounds the notification items of one request: Adyen sends
// one, each item is a row inserted concurrently, and a larger batch is
// not something Adyen would send.
const AdyenMaxItems = 100

// Adyen's signature location and event codes.
const (
	adyenSignaturePath = "additionalData.hmacSignature"
	adyenAuthorisation = "AUTHORISATION"
)

// adyenAccepted is the body Adyen's legacy acknowledgement rule looks for.
var adyenAccepted = []byte("[accepted]")

func newAdyen(cfg Config) (Platform, error) {
	var keys [][]byte
	var errs []error
	for i, s := range cfg.Secrets {
		if s == "" {
			continue // an unset variable: one set key of a rotation pair is enough
		}
		k, err := signature.HexKey(s)
		if err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("secrets[%d]", i), fmt.Errorf("the Adyen HMAC %w", err)))
			continue
		}
		keys = append(keys, k)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	v, err := signature.NewFieldHMAC(adyenSignaturePath, ":", keys)
	if err != nil {
		return nil, fieldErr("secrets", err)
	}
	accounts := map[string]bool{}
	for _, a := range splitList(cfg.MerchantAccounts) {
		accounts[a] = true
	}
	return &adyen{verifier: v, accounts: accounts}, nil
}

// adyenBody is the envelope; the items are read one by one.
type adyenBody struct {
	NotificationItems json.RawMessage `json:"notificationItems"`
}

type adyenEntry struct {
	Item *adyenItem `json:"NotificationRequestItem"`
}

// adyenItem holds what callgate reads of a NotificationRequestItem.
type adyenItem struct {
	PSPReference        string `json:"pspReference"`
	OriginalReference   string `json:"originalReference"`
	MerchantAccountCode string `json:"merchantAccountCode"`
	MerchantReference   string `json:"merchantReference"`
	Amount              *struct {
		Value    json.RawMessage `json:"value"`
		Currency string          `json:"currency"`
	} `json:"amount"`
	EventCode      string `json:"eventCode"`
	Success        string `json:"success"`
	EventDate      string `json:"eventDate"`
	AdditionalData struct {
		HMACSignature string `json:"hmacSignature"`
	} `json:"additionalData"`

	amount int64  // amount.value, parsed
	value  string // amount.value as signed ("" when absent)
}

// isNullJSON reports an absent or null JSON value.
func isNullJSON(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

func (p *adyen) Kind() string      { return callback.KindPayment }
func (p *adyen) Headers() []string { return nil }

func (p *adyen) Read(req Request) ([]Callback, error) {
	if err := callback.CheckJSONShape(req.Body); err != nil {
		return nil, err
	}
	var body adyenBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return nil, badRequest("the body is not an Adyen notification (a JSON object with notificationItems)")
	}
	raw := strings.TrimSpace(string(body.NotificationItems))
	switch {
	case raw == "" || raw == "null":
		return nil, badRequest("notificationItems is missing")
	case raw[0] != '[':
		return nil, badRequest("notificationItems must be an array")
	}
	items, err := readAdyenItems(body.NotificationItems)
	if err != nil {
		return nil, err
	}
	// Every item is authenticated before any is interpreted: a forged
	// item refuses the request as unauthenticated (401), whatever the
	// others hold.
	for i := range items {
		if err := p.verifier.Verify(items[i].signedFields(), items[i].AdditionalData.HMACSignature); err != nil {
			return nil, fmt.Errorf("notificationItems[%d]: %w", i, err)
		}
	}
	// The HMAC key is per webhook, and one webhook may serve a company's
	// every merchant account: the signed merchantAccountCode says whose
	// notification it is.
	for i := range items {
		if !p.accounts[items[i].MerchantAccountCode] {
			return nil, fmt.Errorf("notificationItems[%d]: %w", i, foreign("merchantAccountCode", items[i].MerchantAccountCode))
		}
	}
	out := make([]Callback, len(items))
	for i := range items {
		cb, err := items[i].callback()
		if err != nil {
			return nil, fmt.Errorf("notificationItems[%d]: %w", i, err)
		}
		out[i] = cb
	}
	return out, nil
}

// readAdyenItems decodes the notificationItems array, item by item, so
// the cap is enforced while reading and an error names its item.
func readAdyenItems(raw json.RawMessage) ([]adyenItem, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, badRequest("notificationItems must be an array")
	}
	var items []adyenItem
	for i := 0; dec.More(); i++ {
		if i == AdyenMaxItems {
			return nil, badRequest("notificationItems holds more than %d items; at most %d are read per request", AdyenMaxItems, AdyenMaxItems)
		}
		items = append(items, adyenItem{})
		if err := readAdyenItem(dec, &items[i]); err != nil {
			return nil, fmt.Errorf("notificationItems[%d]: %w", i, err)
		}
	}
	if len(items) == 0 {
		return nil, badRequest("notificationItems is empty")
	}
	return items, nil
}

// readAdyenItem decodes the next entry of notificationItems into item.
func readAdyenItem(dec *json.Decoder, item *adyenItem) error {
	var e adyenEntry
	if err := dec.Decode(&e); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return badRequest("%s has the wrong JSON type", adyenField(te.Field))
		}
		return badRequest("not a {\"NotificationRequestItem\":{...}} object")
	}
	if e.Item == nil {
		return badRequest("NotificationRequestItem is missing")
	}
	*item = *e.Item
	if item.Amount == nil || isNullJSON(item.Amount.Value) {
		return nil
	}
	// A JSON integer, as Adyen sends it; its decimal text is what is
	// signed (strconv formatting, as Adyen's own library does).
	v, err := strconv.ParseInt(string(item.Amount.Value), 10, 64)
	if err != nil {
		return badRequest("amount.value must be an integer number of minor units")
	}
	item.amount, item.value = v, strconv.FormatInt(v, 10)
	return nil
}

// adyenField names a field of an UnmarshalTypeError the way Adyen's
// documentation does (the path below NotificationRequestItem).
func adyenField(path string) string {
	if rest, ok := strings.CutPrefix(path, "NotificationRequestItem."); ok {
		return rest
	}
	return path
}

// signedFields are the eight values Adyen signs, in its order.
func (it *adyenItem) signedFields() []string {
	currency := ""
	if it.Amount != nil {
		currency = it.Amount.Currency
	}
	return []string{it.PSPReference, it.OriginalReference, it.MerchantAccountCode, it.MerchantReference,
		it.value, currency, it.EventCode, it.Success}
}

// callback maps a verified item to its callback.
func (it *adyenItem) callback() (Callback, error) {
	switch {
	case strings.TrimSpace(it.PSPReference) == "":
		return Callback{}, badRequest("pspReference is missing")
	case strings.TrimSpace(it.EventCode) == "":
		return Callback{}, badRequest("eventCode is missing")
	case it.Success != "true" && it.Success != "false":
		return Callback{}, badRequest("success must be \"true\" or \"false\"")
	}
	id := it.PSPReference + ":" + it.EventCode + ":" + it.Success
	if it.EventCode != adyenAuthorisation {
		key := it.MerchantReference
		if strings.TrimSpace(key) == "" || len(key) > callback.MaxBusinessKeyLen {
			key = it.PSPReference
		}
		ev := callback.PaymentEvent{Ignored: fmt.Sprintf("adyen eventCode %s is not %s", callback.Truncate(it.EventCode, 64), adyenAuthorisation)}
		return Callback{EventID: id, BusinessKey: key, Event: ev}, nil
	}
	if strings.TrimSpace(it.MerchantReference) == "" {
		return Callback{}, badRequest("merchantReference is missing")
	}
	if it.Amount == nil || isNullJSON(it.Amount.Value) {
		return Callback{}, badRequest("amount.value is missing")
	}
	amount := it.amount
	if amount < 0 {
		return Callback{}, badRequest("amount.value must not be negative")
	}
	amount, currency, err := adyenDigits.toISO(amount, it.Amount.Currency)
	if err != nil {
		return Callback{}, badRequest("amount: %v", err)
	}
	ev := callback.PaymentEvent{
		OrderCode: it.MerchantReference,
		PaymentNo: it.PSPReference,
		Amount:    amount,
		Currency:  currency,
		Status:    callback.PaymentFailed,
	}
	if it.Success == "true" {
		ev.Status = callback.PaymentSuccess
		if t, err := time.Parse(time.RFC3339, it.EventDate); err == nil {
			t = t.UTC()
			ev.PaidAt = &t
		}
	}
	return Callback{EventID: id, BusinessKey: ev.OrderCode, Event: ev}, nil
}

func (p *adyen) Accepted([]Stored) Answer {
	return Answer{Status: 200, ContentType: "text/plain; charset=utf-8", Body: adyenAccepted}
}

func (p *adyen) Refused(status int, reason string) Answer { return refusedJSON(status, reason) }
