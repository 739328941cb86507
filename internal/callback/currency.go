package callback

import (
	"fmt"
	"strings"

	"github.com/bojanz/currency"
)

// Currencies are ISO 4217 codes, from bojanz/currency's table (generated
// from CLDR with ISO 4217's minor units). golang.org/x/text/currency was
// the other candidate; its table lacks current codes (VES, MRU, SLE, ZWG)
// and gives CLDR's digits where ISO 4217 differs (IDR 0 and IQD 0 against
// ISO's 2 and 3).

// Currency returns code as the ISO 4217 code it names, in upper case
// ("usd" is USD), or an error naming it when it names none.
func Currency(code string) (string, error) {
	c := strings.ToUpper(strings.TrimSpace(code))
	if c == "" || !currency.IsValid(c) { // IsValid takes "" as "no currency"
		return "", fmt.Errorf("currency %q is not an ISO 4217 code", Truncate(code, 16))
	}
	return c, nil
}

// CurrencyDigits is the number of minor digits of an ISO 4217 currency
// (JPY 0, USD 2, KWD 3), its exponent: how a decimal amount converts to
// minor units.
func CurrencyDigits(code string) (int, error) {
	c, err := Currency(code)
	if err != nil {
		return 0, err
	}
	d, _ := currency.GetDigits(c)
	return int(d), nil
}
