package platform

import (
	"fmt"
	"math"
	"strings"

	"callgate/internal/callback"
)

// MinorUnits converts a decimal amount in major units ("2.00" yuan,
// "10.5" dollars) to minor units (200 fen, 1050 cents) exactly, never
// through a float. digits is the currency's number of minor digits (2 for
// CNY, USD and EUR; see [AmountIn]). Extra fractional digits are
// allowed only when they are zeros ("2.000" is 200, "2.001" is refused).
// Signs, exponents, spaces and more than 15 integer digits are refused.
func MinorUnits(s string, digits int) (int64, error) {
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || len(intPart) > 15 || (hasDot && frac == "") {
		return 0, fmt.Errorf("amount %q is not a decimal number", s)
	}
	var n int64
	for _, c := range []byte(intPart) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("amount %q is not a decimal number", s)
		}
		n = n*10 + int64(c-'0')
	}
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("amount %q is not a decimal number", s)
		}
		if i >= digits && c != '0' {
			return 0, fmt.Errorf("amount %q has more than %d decimal places", s, digits)
		}
	}
	for i := range digits {
		d := int64(0)
		if i < len(frac) {
			d = int64(frac[i] - '0')
		}
		if n > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("amount %q is too large", s)
		}
		n = n*10 + d
	}
	return n, nil
}

// AmountIn converts a decimal amount in major units of currency (an ISO
// 4217 code, any case) to minor units by the currency's exponent (JPY 0,
// USD 2, KWD 3), and returns the currency's code in upper case.
func AmountIn(amount, currency string) (int64, string, error) {
	code, err := callback.Currency(currency)
	if err != nil {
		return 0, "", err
	}
	digits, err := callback.CurrencyDigits(code)
	if err != nil {
		return 0, "", err
	}
	n, err := MinorUnits(amount, digits)
	return n, code, err
}

// minorDigits are the currencies whose minor units a platform counts
// unlike ISO 4217, with the platform's number of minor digits: what its
// integer amounts are in.
type minorDigits map[string]int

// The platforms' published exceptions.
var (
	// stripeDigits: Stripe's zero-decimal list includes MGA (ISO: 2), and
	// ISK and UGX (ISO: 0) are sent with two decimals ending in 00
	// (docs.stripe.com/currencies, "Zero-decimal" and "Special cases").
	stripeDigits = minorDigits{"MGA": 0, "ISK": 2, "UGX": 2}
	// adyenDigits: "for CLP, CVE, IDR and ISK the standard has a different
	// number of decimals than shown in our table" (docs.adyen.com,
	// development-resources/currency-codes).
	adyenDigits = minorDigits{"CLP": 2, "CVE": 0, "IDR": 0, "ISK": 2}
)

// toISO converts value, an integer amount of currency in the platform's
// minor units, to ISO 4217 minor units (the unit of orders.amount), and
// returns the currency's code in upper case. An amount that is not a
// whole number of ISO minor units (ISK 5050 from a platform counting two
// decimals) is refused, never rounded.
func (d minorDigits) toISO(value int64, currency string) (int64, string, error) {
	code, err := callback.Currency(currency)
	if err != nil {
		return 0, "", err
	}
	iso, err := callback.CurrencyDigits(code)
	if err != nil {
		return 0, "", err
	}
	platform, ok := d[code]
	if !ok || platform == iso {
		return value, code, nil
	}
	scale := int64(1)
	for range max(platform-iso, iso-platform) {
		scale *= 10
	}
	if platform > iso {
		if value%scale != 0 {
			return 0, "", fmt.Errorf("amount %d %s is not a whole number of %s's ISO 4217 minor units (the platform counts %d decimals, ISO 4217 %d)",
				value, code, code, platform, iso)
		}
		return value / scale, code, nil
	}
	if value > math.MaxInt64/scale {
		return 0, "", fmt.Errorf("amount %d %s is too large", value, code)
	}
	return value * scale, code, nil
}
