package platform_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/platform"
)

func TestMinorUnits(t *testing.T) {
	ok := []struct {
		in     string
		digits int
		want   int64
	}{
		{"2.00", 2, 200}, {"0.01", 2, 1}, {"19.9", 2, 1990}, {"7", 2, 700}, {"2.000", 2, 200},
		{"1000", 0, 1000}, {"1.500", 3, 1500}, {"0.10", 2, 10}, {"999999999999999", 2, 99999999999999900},
		// 0.29 is 0.28999999999999998 as a float64: a float conversion gives 28.
		{"0.29", 2, 29}, {"1.15", 2, 115},
	}
	for _, c := range ok {
		got, err := platform.MinorUnits(c.in, c.digits)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	for _, bad := range []string{"", ".5", "5.", "-1.00", "+1", "1e3", "1.001", " 1", "1,00", "0x10", "1.2.3", "1234567890123456"} {
		_, err := platform.MinorUnits(bad, 2)
		require.Error(t, err, "%q", bad)
	}
}

// TestAmountOverflowIsRefused: 15 integer digits and CLF's 4 decimals do
// not fit in int64 minor units; the conversion refuses them rather than
// wrap to a negative amount.
func TestAmountOverflowIsRefused(t *testing.T) {
	_, _, err := platform.AmountIn("999999999999999.9999", "CLF")
	require.ErrorContains(t, err, `amount "999999999999999.9999" is too large`)
	n, code, err := platform.AmountIn("922337203685477.5807", "CLF")
	require.NoError(t, err, "the largest int64 still converts")
	require.Equal(t, int64(9223372036854775807), n)
	require.Equal(t, "CLF", code)
	_, _, err = platform.AmountIn("922337203685477.5808", "CLF")
	require.Error(t, err)
}

// FuzzMinorUnits checks the conversion against exact rational arithmetic.
func FuzzMinorUnits(f *testing.F) {
	for _, s := range []string{"2.00", "0.29", "1.001", "12345678901234.99", "", "-1", "1e3"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, digits int) {
		digits = ((digits % 5) + 5) % 5 // 0 to 4: CLF has 4
		got, err := platform.MinorUnits(s, digits)
		if err != nil {
			return
		}
		r, ok := new(big.Rat).SetString(s)
		require.True(t, ok, "accepted %q, which is not a number", s)
		if exact := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil))); exact.IsInt() {
			require.True(t, exact.Num().IsInt64(), "accepted %q (%d decimals), which does not fit in int64", s, digits)
		}
		require.True(t, ok, "accepted %q, which is not a number", s)
		scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil))
		want := r.Mul(r, scale)
		require.True(t, want.IsInt(), "%q has more than %d decimals", s, digits)
		require.Equal(t, want.Num().Int64(), got, "%q", s)
	})
}
