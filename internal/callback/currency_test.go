package callback_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
)

func TestCurrencyDigits(t *testing.T) {
	for code, want := range map[string]int{"JPY": 0, "KRW": 0, "USD": 2, "cny": 2, "IDR": 2, "KWD": 3, "IQD": 3, "BHD": 3, "VES": 2, "CLF": 4} {
		got, err := callback.CurrencyDigits(code)
		require.NoError(t, err, code)
		require.Equal(t, want, got, code)
	}
	for _, bad := range []string{"", "US", "USDD", "ABC", "XXX", "12$"} {
		_, err := callback.CurrencyDigits(bad)
		require.Error(t, err, "%q", bad)
	}
	c, err := callback.Currency(" eur ")
	require.NoError(t, err)
	require.Equal(t, "EUR", c)
}
