package platform

import (
	"fmt"
	"strings"
)

// MinorUnits converts a decimal amount in major units ("2.00" yuan,
// "10.5" dollars) to minor units (200 fen, 1050 cents) exactly, never
// through a float. digits is the currency's number of minor digits (2 for
// CNY, USD and EUR; see [CurrencyDigits]). Extra fractional digits are
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
		n = n*10 + d
	}
	return n, nil
}

// CurrencyDigits is the number of minor digits of an ISO 4217 currency
// (case-insensitive): 2 unless the currency is listed with 0 or 3.
func CurrencyDigits(currency string) int {
	switch strings.ToUpper(currency) {
	case "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF":
		return 0
	case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND":
		return 3
	default:
		return 2
	}
}
