package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
// pays, "false" fails; OFFER_CLOSED is a failed attempt of that payment;
// refunds, cancellations, chargebacks and ORDER_CLOSED are mapped by
// adyenItem.event; any other eventCode (CAPTURE, ...: adyenNoEffect) is
// stored and processed without effect, the reason, naming the code, in the
// attempt's note. A signed item of ours that cannot be read is kept as
// unreadable, never refused. The body's live must equal livemode (ADYEN_LIVE, default
// "true"). Order:
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
	live     string          // "true" or "false": the body's live must equal it
}

// AdyenMaxItems bounds the notification items of one request: Adyen sends
// one, each item is a row inserted concurrently, and a larger batch is
// not something Adyen would send.
const AdyenMaxItems = 100

// Adyen's signature location.
const adyenSignaturePath = "additionalData.hmacSignature"

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
	live := strings.TrimSpace(cfg.Livemode)
	switch live {
	case "":
		live = "true"
	case "true", "false":
	default:
		return nil, fieldErr("livemode", fmt.Errorf("%q is neither true nor false (ADYEN_LIVE)", cfg.Livemode))
	}
	return &adyen{verifier: v, accounts: accounts, live: live}, nil
}

// adyenBody is the envelope; the items are read one by one.
type adyenBody struct {
	Live              string          `json:"live"`
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
		// DisputeStatus is a dispute stage's status in Adyen's dispute
		// flow (Undefended, Pending, Responded, Lost, Accepted, Expired, Won).
		DisputeStatus string `json:"disputeStatus"`
		// Defendable is "false" for a chargeback that cannot be defended.
		Defendable string `json:"defendable"`
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
	body, items, err := p.items(req)
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
	return p.interpret(body, items)
}

func (p *adyen) Reread(req Request) ([]Callback, error) {
	body, items, err := p.items(req)
	if err != nil {
		return nil, err
	}
	return p.interpret(body, items)
}

// items reads the body and its notification items.
func (p *adyen) items(req Request) (adyenBody, []adyenItem, error) {
	var body adyenBody
	if err := callback.CheckJSONShape(req.Body); err != nil {
		return body, nil, err
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return body, nil, badRequest("the body is not an Adyen notification (a JSON object with notificationItems)")
	}
	raw := strings.TrimSpace(string(body.NotificationItems))
	switch {
	case raw == "" || raw == "null":
		return body, nil, badRequest("notificationItems is missing")
	case raw[0] != '[':
		return body, nil, badRequest("notificationItems must be an array")
	}
	items, err := readAdyenItems(body.NotificationItems)
	return body, items, err
}

// interpret checks the verified items' merchant and mode and maps each to
// its callback.
func (p *adyen) interpret(body adyenBody, items []adyenItem) ([]Callback, error) {
	// The HMAC key is per webhook, and one webhook may serve a company's
	// every merchant account: the signed merchantAccountCode says whose
	// notification it is.
	for i := range items {
		if !p.accounts[items[i].MerchantAccountCode] {
			return nil, fmt.Errorf("notificationItems[%d]: %w", i, foreign("merchantAccountCode", items[i].MerchantAccountCode))
		}
	}
	// live is not signed, but a test webhook's items are signed with the
	// test HMAC key, which a live source does not hold: a mismatch is a
	// misrouted webhook, refused like another merchant's.
	if body.Live != p.live {
		return nil, foreign("live", body.Live)
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

// Adyen's event codes (docs.adyen.com/development-resources/webhooks/webhook-types,
// "Standard webhook event codes"), by what they are to an order: a
// modification names the payment it modifies in originalReference, and
// its own reference in pspReference.
const (
	adyenAuthorisation     = "AUTHORISATION"
	adyenRefund            = "REFUND"
	adyenRefundFailed      = "REFUND_FAILED"
	adyenRefundedReversed  = "REFUNDED_REVERSED"
	adyenCancelOrRefund    = "CANCEL_OR_REFUND"
	adyenCancellation      = "CANCELLATION"
	adyenChargebackNotice  = "NOTIFICATION_OF_CHARGEBACK"
	adyenChargeback        = "CHARGEBACK"
	adyenChargebackReverse = "CHARGEBACK_REVERSED"
	adyenSecondChargeback  = "SECOND_CHARGEBACK"
	adyenPrearbitrationWon = "PREARBITRATION_WON"
	adyenPrearbitrationLst = "PREARBITRATION_LOST"
	adyenOrderClosed       = "ORDER_CLOSED"
	adyenOfferClosed       = "OFFER_CLOSED"
	// The dispute flow's other stages (docs.adyen.com/risk-management/disputes-api/dispute-notifications).
	adyenInformationSupplied = "INFORMATION_SUPPLIED"
	adyenDefensePeriodEnded  = "DISPUTE_DEFENSE_PERIOD_ENDED"
	adyenIssuerTimeExpired   = "ISSUER_RESPONSE_TIMEFRAME_EXPIRED"
)

// adyenNoEffect are the event codes Adyen documents (webhook-types,
// "Standard webhook event codes"; adyen-go-api-library src/webhook
// webhook_handler.go) that change no payment of an order, each with why:
// stored, processed as a SUCCESS without effect, the reason in the
// attempt's note (docs/platforms/adyen.md has the whole table).
var adyenNoEffect = map[string]string{
	"CAPTURE":                    "is the capture of an authorised payment: its AUTHORISATION paid the order",
	"CAPTURE_FAILED":             "is a capture that failed: the payment stays as its AUTHORISATION left it, for a person to see in the Customer Area",
	"AUTHORISATION_ADJUSTMENT":   "adjusts an authorised amount: what was paid is its AUTHORISATION's",
	"PENDING":                    "says a payment is not final yet: its AUTHORISATION will say how it ended",
	"EXPIRE":                     "says an authorisation's remaining amount expired uncaptured: no money moved",
	"TECHNICAL_CANCEL":           "cancels a technical duplicate of a payment: no order's payment",
	"ORDER_OPENED":               "opens an Adyen order (partial payments): its payments' AUTHORISATIONs say what was paid",
	"NOTIFICATION_OF_FRAUD":      "reports fraud on a payment: a CHARGEBACK, if one follows, moves money",
	"REQUEST_FOR_INFORMATION":    "asks for documents about a payment: no money moved yet (a chargeback may follow)",
	"ISSUER_COMMENTS":            "carries the issuer's comments on a dispute: no money moved",
	"MANUAL_REVIEW_ACCEPT":       "accepts a payment held for review: its AUTHORISATION says it was paid",
	"MANUAL_REVIEW_REJECT":       "rejects a payment held for review: its CANCELLATION or REFUND, if any, moves money",
	"POSTPONED_REFUND":           "says a refund is postponed: its REFUND will say how it ended",
	"VOID_PENDING_REFUND":        "voids a pending POS refund: no money moved",
	"HANDLED_EXTERNALLY":         "is a payment handled outside Adyen: nothing Adyen holds changed",
	"RECURRING_CONTRACT":         "stores a shopper's recurring details: no payment",
	"AUTORESCUE":                 "says a failed subscription payment is being retried: its AUTHORISATION will say how it ended",
	"AUTORESCUE_NEXT_ATTEMPT":    "schedules the next auto-rescue attempt: no payment yet",
	"CANCEL_AUTORESCUE":          "stops an auto-rescue: no money moved",
	"REPORT_AVAILABLE":           "says a report is ready to download: reconciliation is by reports, not by this webhook",
	"REFUND_WITH_DATA":           "is an unreferenced refund (no payment of an order)",
	"PAIDOUT_REVERSED":           "reverses a payout: no payment of an order",
	"PAYOUT_THIRDPARTY":          "is a payout: no payment of an order",
	"PAYOUT_DECLINE":             "is a payout: no payment of an order",
	"PAYOUT_EXPIRE":              "is a payout: no payment of an order",
	"FUND_TRANSFER":              "is a fund transfer: no payment of an order",
	"ACH_NOTIFICATION_OF_CHANGE": "reports changed bank details: no money moved",
	"AUTHORISE_REFERRAL":         "refers an authorisation to the issuer: its AUTHORISATION will say how it ended",
	"FRAUD_ONLY":                 "is a fraud check alone: no payment",
	"PROCESS_RETRY":              "says Adyen retries processing: its outcome comes in its own event",
}

// callback maps a verified item to its callback. Its event id is
// pspReference:eventCode:success; an item that cannot be read once its
// event id is known is kept as unreadable.
func (it *adyenItem) callback() (Callback, error) {
	if strings.TrimSpace(it.PSPReference) == "" {
		return Callback{}, badRequest("pspReference is missing")
	}
	id := it.PSPReference + ":" + it.EventCode + ":" + it.Success
	var ev callback.PaymentEvent
	var err error
	switch {
	// Signed and ours from here: what cannot be read is kept, never
	// refused (Adyen would resend it for 30 days).
	case strings.TrimSpace(it.EventCode) == "":
		err = badRequest("eventCode is missing")
	case it.Success != "true" && it.Success != "false":
		err = badRequest("success must be \"true\" or \"false\"")
	default:
		ev, err = it.event()
	}
	key := it.MerchantReference
	if it.modification() {
		// A modification's merchantReference is the one given with the
		// modification request, not necessarily the order's: it is found
		// by the payment it names.
		key = it.payment()
	}
	if err == nil && ev.Ignored == "" && (ev.Type == "" || ev.Type == callback.TypePayment) && len(key) > callback.MaxBusinessKeyLen {
		// A payment's merchantReference is its order: no order has one
		// this long.
		err = badRequest("merchantReference is longer than %d characters", callback.MaxBusinessKeyLen)
	}
	if err != nil {
		return unreadable(id, key, err), nil
	}
	if strings.TrimSpace(key) == "" || len(key) > callback.MaxBusinessKeyLen {
		key = it.PSPReference
	}
	return Callback{EventID: id, BusinessKey: key, Event: ev}, nil
}

// modification reports an item about an earlier payment, which it names
// in originalReference.
func (it *adyenItem) modification() bool {
	switch it.EventCode {
	case adyenRefund, adyenCancelOrRefund, adyenCancellation, adyenRefundFailed, adyenRefundedReversed:
		return true
	}
	return false
}

// payment is the payment an item is about: its originalReference, else
// (a chargeback notice may carry the payment's own reference) its
// pspReference.
func (it *adyenItem) payment() string {
	if strings.TrimSpace(it.OriginalReference) != "" {
		return it.OriginalReference
	}
	return it.PSPReference
}

// event maps a verified item's eventCode and success flag.
func (it *adyenItem) event() (callback.PaymentEvent, error) {
	ok := it.Success == "true"
	ignored := func(why string) (callback.PaymentEvent, error) {
		return callback.PaymentEvent{Ignored: fmt.Sprintf("adyen eventCode %s (success %s) %s", callback.Truncate(it.EventCode, 64), it.Success, why)}, nil
	}
	ev := callback.PaymentEvent{}
	switch it.EventCode {
	case adyenAuthorisation:
		if strings.TrimSpace(it.MerchantReference) == "" {
			return ev, badRequest("merchantReference is missing")
		}
		ev.OrderCode, ev.PaymentNo, ev.Status = it.MerchantReference, it.PSPReference, callback.PaymentFailed
		ev.OccurredAt = parseRFC3339(it.EventDate)
		if ok {
			ev.Status, ev.PaidAt, ev.OccurredAt = callback.PaymentSuccess, ev.OccurredAt, nil
		}
	case adyenOfferClosed:
		// The shopper did not complete the payment (an iDEAL or other
		// redirect offer expired: docs.adyen.com/api-explorer/Webhooks/1/post/OFFER_CLOSED):
		// a failed attempt of that payment, as AUTHORISATION false is.
		if !ok {
			return ignored("changes nothing")
		}
		if strings.TrimSpace(it.MerchantReference) == "" {
			return ev, badRequest("merchantReference is missing")
		}
		ev.OrderCode, ev.PaymentNo, ev.Status = it.MerchantReference, it.PSPReference, callback.PaymentFailed
		ev.Reason = "adyen OFFER_CLOSED: the offer expired before the shopper paid"
	case adyenRefund, adyenCancelOrRefund, adyenCancellation:
		// A cancellation of the authorisation gives the shopper's money
		// back as a refund does: the order was paid, and is no more.
		ev.Type, ev.RefundNo, ev.PaymentNo, ev.Status = callback.TypeRefund, it.PSPReference, it.payment(), callback.RefundSuccess
		ev.InitiatedAt = parseRFC3339(it.EventDate)
		if !ok {
			ev.Status, ev.Reason = callback.RefundFailed, "adyen "+it.EventCode+" was refused"
		}
	case adyenRefundFailed:
		if !ok {
			return ignored("changes nothing")
		}
		ev.Type, ev.RefundNo, ev.PaymentNo, ev.Status, ev.Reason = callback.TypeRefund, it.PSPReference, it.payment(), callback.RefundFailed,
			"adyen REFUND_FAILED: the refund failed after it was processed"
	case adyenRefundedReversed:
		if !ok {
			return ignored("changes nothing")
		}
		ev.Type, ev.RefundNo, ev.PaymentNo, ev.Status = callback.TypeRefund, it.PSPReference, it.payment(), callback.RefundReversed
	case adyenChargebackNotice, adyenChargeback, adyenSecondChargeback, adyenPrearbitrationLst, adyenChargebackReverse, adyenPrearbitrationWon,
		adyenInformationSupplied, adyenDefensePeriodEnded, adyenIssuerTimeExpired:
		if !ok {
			return ignored("changes nothing")
		}
		// Every stage carries the dispute's own pspReference; the payment
		// is its originalReference. Adyen's own CHARGEBACK_REVERSED and
		// SECOND_CHARGEBACK examples have none: the payment is then taken
		// to be the pspReference, and the order is found by
		// merchantReference, else that payment, else the dispute recorded
		// from its earlier stages (whose payment the dispute keeps).
		ev.Type, ev.DisputeID, ev.PaymentNo = callback.TypeDispute, it.PSPReference, it.payment()
		ev.OrderCode = strings.TrimSpace(it.MerchantReference)
		if len(ev.OrderCode) > callback.MaxBusinessKeyLen {
			ev.OrderCode = ""
		}
		ev.Status = adyenDisputeStatus(it.EventCode, it.AdditionalData.DisputeStatus, it.AdditionalData.Defendable)
	case adyenOrderClosed:
		if ok {
			return ignored("is an order whose payments all succeeded: its AUTHORISATION pays it")
		}
		if strings.TrimSpace(it.MerchantReference) == "" {
			return ev, badRequest("merchantReference is missing")
		}
		return callback.PaymentEvent{Type: callback.TypeClose, OrderCode: it.MerchantReference,
			Reason: "adyen ORDER_CLOSED: the order was not paid in full in time", OccurredAt: parseRFC3339(it.EventDate)}, nil
	default:
		if why, known := adyenNoEffect[it.EventCode]; known {
			return ignored(why)
		}
		return ignored("changes no payment")
	}
	if it.Amount == nil || isNullJSON(it.Amount.Value) {
		return ev, badRequest("amount.value is missing")
	}
	if it.amount < 0 {
		return ev, badRequest("amount.value must not be negative")
	}
	amount, currency, err := adyenDigits.toISO(it.amount, it.Amount.Currency)
	if err != nil {
		return ev, badRequest("amount: %v", err)
	}
	ev.Amount, ev.Currency = amount, currency
	if ev.PaidAt == nil {
		ev.OccurredAt = parseRFC3339(it.EventDate)
	}
	if ev.Type == callback.TypeRefund && ev.OrderCode == "" && len(it.MerchantReference) <= callback.MaxBusinessKeyLen {
		// A modification's merchantReference is the one given with its
		// request, often the order's: tried first, then its payment.
		ev.OrderCode = strings.TrimSpace(it.MerchantReference)
	}
	return ev, nil
}

// adyenDisputeStatus maps a dispute stage by Adyen's dispute flow
// (docs.adyen.com/risk-management/understanding-disputes/dispute-process-and-flow):
// a chargeback is debited at once (CHARGEBACK) but stays defendable, so
// it is OPEN until it is final: LOST when its disputeStatus says so
// (Lost, Accepted, Expired), it is not defendable, or its defence period ended
// (DISPUTE_DEFENSE_PERIOD_ENDED), on a second chargeback and on a lost
// pre-arbitration; WON when it is reversed (CHARGEBACK_REVERSED, the
// issuer's time ran out, a won pre-arbitration). NOTIFICATION_OF_CHARGEBACK
// and INFORMATION_SUPPLIED leave it OPEN.
func adyenDisputeStatus(eventCode, disputeStatus, defendable string) string {
	switch eventCode {
	case adyenChargeback:
		switch strings.ToLower(disputeStatus) {
		case "lost", "accepted", "expired":
			return callback.DisputeLost
		case "won":
			return callback.DisputeWon
		}
		if strings.EqualFold(defendable, "false") {
			return callback.DisputeLost // nothing left to defend: final
		}
		return callback.DisputeOpen
	case adyenDefensePeriodEnded, adyenSecondChargeback, adyenPrearbitrationLst:
		return callback.DisputeLost
	case adyenChargebackReverse, adyenPrearbitrationWon, adyenIssuerTimeExpired:
		return callback.DisputeWon
	}
	return callback.DisputeOpen
}

func (p *adyen) Accepted([]Stored) Answer {
	return Answer{Status: 200, ContentType: "text/plain; charset=utf-8", Body: adyenAccepted}
}

func (p *adyen) Refused(status int, reason string) Answer { return refusedJSON(status, reason) }
