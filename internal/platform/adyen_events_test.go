package platform_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// adyenMapped are the event codes the adyen preset gives an effect to
// (with success "true"); adyenNoted those it stores without effect, each
// with a note naming it (docs/platforms/adyen.md, "Event codes").
var (
	adyenMapped = []string{"AUTHORISATION", "OFFER_CLOSED", "REFUND", "CANCEL_OR_REFUND", "CANCELLATION", "REFUND_FAILED",
		"REFUNDED_REVERSED", "NOTIFICATION_OF_CHARGEBACK", "CHARGEBACK", "CHARGEBACK_REVERSED", "SECOND_CHARGEBACK",
		"PREARBITRATION_WON", "PREARBITRATION_LOST", "INFORMATION_SUPPLIED", "DISPUTE_DEFENSE_PERIOD_ENDED",
		"ISSUER_RESPONSE_TIMEFRAME_EXPIRED"}
	adyenNoted = []string{"CAPTURE", "CAPTURE_FAILED", "AUTHORISATION_ADJUSTMENT", "PENDING", "EXPIRE", "TECHNICAL_CANCEL",
		"ORDER_OPENED", "ORDER_CLOSED", "NOTIFICATION_OF_FRAUD", "REQUEST_FOR_INFORMATION", "ISSUER_COMMENTS",
		"MANUAL_REVIEW_ACCEPT", "MANUAL_REVIEW_REJECT", "POSTPONED_REFUND", "VOID_PENDING_REFUND", "HANDLED_EXTERNALLY",
		"RECURRING_CONTRACT", "AUTORESCUE", "AUTORESCUE_NEXT_ATTEMPT", "CANCEL_AUTORESCUE", "REPORT_AVAILABLE",
		"REFUND_WITH_DATA", "PAIDOUT_REVERSED", "PAYOUT_THIRDPARTY", "PAYOUT_DECLINE", "PAYOUT_EXPIRE", "FUND_TRANSFER",
		"ACH_NOTIFICATION_OF_CHANGE", "AUTHORISE_REFERRAL", "FRAUD_ONLY", "PROCESS_RETRY", "A_CODE_ADYEN_ADDS_LATER"}
)

// TestAdyenOfferClosedIsAFailedAttempt: OFFER_CLOSED (Adyen's own sample,
// adyen-java-api-library mocks/notification/offer-closed.json: an iDEAL
// offer of 272.11 EUR for order 000000275 expired) is a failed attempt of
// that payment: recorded as its FAILED payment fact, and the order, which
// nothing paid, reads payment FAILED. A later AUTHORISATION of another
// payment still pays it.
func TestAdyenOfferClosedIsAFailedAttempt(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	p.CreateOrder(t, "000000275", 27211, "EUR")
	offer := adyenItem{PSP: "8532565401975321", Account: "CallgateECOM", Ref: "000000275", Value: 27211, Currency: "EUR",
		Event: "OFFER_CLOSED", Success: "true", Date: "2019-04-29T14:17:30+02:00"}
	a := p.Post(t, "adyen", adyenSigned(adyenKey, offer), jsonHeader())
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	require.Equal(t, "[accepted]", string(a.Body))
	row := p.Settled(t, "adyen", "8532565401975321:OFFER_CLOSED:true")
	require.Equal(t, "000000275", row.BusinessKey)

	o := lcOrderOf(t, p, "000000275")
	require.Equal(t, payment.OrderPaymentFailed, o.Status, "the order shows the failed attempt")
	require.Empty(t, o.PaymentNo, "nothing paid it")
	facts := lcFactsOf(t, p, "payment")
	require.Len(t, facts, 1)
	f := facts[0]
	require.Equal(t, []string{"000000275", "8532565401975321", "FAILED", "EUR"}, []string{f.Order, f.Ref, f.Status, f.Currency})
	require.Equal(t, int64(27211), f.Amount)
	require.Equal(t, "adyen OFFER_CLOSED: the offer expired before the shopper paid", f.Reason)

	paid := authorisation("8532565401975999", "000000275", 27211, "true")
	paid.Currency = "EUR"
	require.Equal(t, http.StatusOK, p.Post(t, "adyen", adyenSigned(adyenKey, paid), jsonHeader()).Status)
	p.Settled(t, "adyen", "8532565401975999:AUTHORISATION:true")
	o = lcOrderOf(t, p, "000000275")
	require.Equal(t, payment.OrderPaid, o.Status)
	require.Equal(t, "8532565401975999", o.PaymentNo)
}

// TestAdyenEveryEventCode: every event code Adyen documents for the
// standard webhook is either mapped to an event or read as one without
// effect whose reason names it; none is refused, none unreadable.
func TestAdyenEveryEventCode(t *testing.T) {
	t.Parallel()
	p := newAdyen(t, adyenKey)
	read := func(code string) platform.Callback {
		it := adyenItem{PSP: "PSP-" + code, Original: "PSP-PAID", Account: "CallgateECOM", Ref: "ORD-CODES", Value: 1000,
			Currency: "EUR", Event: code, Success: "true", Date: "2024-05-01T12:30:00+02:00"}
		cbs, err := p.Read(platform.Request{Header: jsonHeader(), Body: adyenSigned(adyenKey, it), Now: time.Now()})
		require.NoError(t, err, code)
		require.Len(t, cbs, 1, code)
		require.Empty(t, cbs[0].Unreadable, code)
		require.Equal(t, "PSP-"+code+":"+code+":true", cbs[0].EventID)
		return cbs[0]
	}
	for _, code := range adyenMapped {
		ev := read(code).Event.(callback.PaymentEvent)
		require.Empty(t, ev.Ignored, "%s has an effect", code)
		require.NoError(t, payment.Validate(ev), code)
	}
	for _, code := range adyenNoted {
		ev := read(code).Event.(callback.PaymentEvent)
		require.Contains(t, ev.Ignored, "adyen eventCode "+code+" (success true) ", "%s: the note names it", code)
	}
	// OFFER_CLOSED that did not happen changes nothing either.
	it := adyenItem{PSP: "PSP-OC", Account: "CallgateECOM", Ref: "ORD-CODES", Value: 1000, Currency: "EUR", Event: "OFFER_CLOSED", Success: "false"}
	cbs, err := p.Read(platform.Request{Header: jsonHeader(), Body: adyenSigned(adyenKey, it), Now: time.Now()})
	require.NoError(t, err)
	require.Equal(t, "adyen eventCode OFFER_CLOSED (success false) changes nothing", cbs[0].Event.(callback.PaymentEvent).Ignored)
}

// TestAdyenNotedCodesLeaveTheOrder: each code stored without effect,
// sent through the gateway, is answered [accepted], processed as a
// SUCCESS whose note names the code, and leaves the paid order as it was,
// notifying no one.
func TestAdyenNotedCodesLeaveTheOrder(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	p.CreateOrder(t, "ORD-AD-NOTED", 1000, "EUR")
	require.Equal(t, http.StatusOK, p.Post(t, "adyen", adyenSigned(adyenKey, authorisation("PSP-NOTED", "ORD-AD-NOTED", 1000, "true")), jsonHeader()).Status)
	p.Settled(t, "adyen", "PSP-NOTED:AUTHORISATION:true")
	for _, code := range adyenNoted {
		it := adyenItem{PSP: "PSP-N-" + code, Original: "PSP-NOTED", Account: "CallgateECOM", Ref: "ORD-AD-NOTED", Value: 1000,
			Currency: "EUR", Event: code, Success: "true", Date: "2024-05-02T12:30:00+02:00"}
		a := p.Post(t, "adyen", adyenSigned(adyenKey, it), jsonHeader())
		require.Equal(t, http.StatusOK, a.Status, "%s: %s", code, a.Body)
		row := p.Settled(t, "adyen", it.PSP+":"+code+":true")
		require.True(t, strings.Contains(p.LastNote(t, row.ID), code), "%s: note %q", code, p.LastNote(t, row.ID))
		require.Empty(t, outboxOf(t, p, row.ID), code)
	}
	o := lcOrderOf(t, p, "ORD-AD-NOTED")
	require.Equal(t, lcOrder{Status: payment.OrderPaid, PaymentNo: "PSP-NOTED"}, o)
}

// TestAdyenSignedItemsThatCannotBeReadAreKept: an item signed with our
// key, for our merchant account, that callgate cannot classify (no
// eventCode, a success that is neither "true" nor "false") is answered
// [accepted] and kept as unreadable, FAILED with the reason, rather than
// refused for Adyen to resend for 30 days.
func TestAdyenSignedItemsThatCannotBeReadAreKept(t *testing.T) {
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	for _, c := range []struct {
		it     adyenItem
		reason string
	}{
		{adyenItem{PSP: "PSP-NOCODE", Account: "CallgateECOM", Ref: "ORD-X", Value: 100, Currency: "EUR", Success: "true"},
			"the notification could not be read: eventCode is missing"},
		{adyenItem{PSP: "PSP-YES", Account: "CallgateECOM", Ref: "ORD-X", Value: 100, Currency: "EUR", Event: "AUTHORISATION", Success: "yes"},
			`the notification could not be read: success must be "true" or "false"`},
	} {
		a := p.Post(t, "adyen", adyenSigned(adyenKey, c.it), jsonHeader())
		require.Equal(t, http.StatusOK, a.Status, string(a.Body))
		require.Equal(t, "[accepted]", string(a.Body))
		row := p.St.WaitStatus(t, logIDOf(t, p, "adyen", c.it.PSP+":"+c.it.Event+":"+c.it.Success), callback.StatusFailed)
		require.Equal(t, c.reason, *row.LastError)
	}
}
