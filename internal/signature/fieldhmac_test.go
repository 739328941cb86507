package signature_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
)

// Adyen's published vector (adyen-go-api-library
// src/hmacvalidator/hmacvalidator_test.go, recomputed independently in
// PLATFORMS.md section 4).
const (
	adyenKey = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	adyenSig = "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="
)

var adyenFields = []string{"pspReference", "originalReference", "merchantAccount", "reference", "1000", "EUR", "EVENT", "true"}

func fieldHMAC(t testing.TB, hexKeys ...string) *signature.FieldHMAC {
	t.Helper()
	var keys [][]byte
	for _, h := range hexKeys {
		k, err := signature.HexKey(h)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	v, err := signature.NewFieldHMAC("additionalData.hmacSignature", ":", keys)
	require.NoError(t, err)
	return v
}

func TestFieldHMACAdyenPublishedVector(t *testing.T) {
	t.Parallel()
	require.Equal(t, "pspReference:originalReference:merchantAccount:reference:1000:EUR:EVENT:true", strings.Join(adyenFields, ":"))
	v := fieldHMAC(t, adyenKey)
	require.NoError(t, v.Verify(adyenFields, adyenSig))
	require.NoError(t, fieldHMAC(t, strings.ToLower(adyenKey)).Verify(adyenFields, adyenSig), "hex in either case")
	sig, err := signature.SignFields(adyenKey, ":", adyenFields...)
	require.NoError(t, err)
	require.Equal(t, adyenSig, sig)

	changed := append([]string(nil), adyenFields...)
	changed[4] = "1001"
	require.ErrorIs(t, v.Verify(changed, adyenSig), signature.ErrMismatch)
	// The fields are joined, not concatenated: moving a separator changes
	// the signed string.
	moved := append([]string(nil), adyenFields...)
	moved[0], moved[1] = "pspReference:originalReference", ""
	require.ErrorIs(t, v.Verify(moved, adyenSig), signature.ErrMismatch)
}

func TestFieldHMACVerify(t *testing.T) {
	t.Parallel()
	const other = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF"
	fields := []string{"a", "", "c"}
	sigOther, err := signature.SignFields(other, ":", fields...)
	require.NoError(t, err)
	sigAdyen, err := signature.SignFields(adyenKey, ":", fields...)
	require.NoError(t, err)
	urlSafe := strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(sigAdyen), "=")

	tests := []struct {
		name string
		keys []string
		sig  string
		want error
	}{
		{"one key", []string{adyenKey}, sigAdyen, nil},
		{"rotation: old key still matches", []string{other, adyenKey}, sigAdyen, nil},
		{"rotation: new key matches", []string{other, adyenKey}, sigOther, nil},
		{"url-safe unpadded", []string{adyenKey}, urlSafe, nil},
		{"wrong key", []string{adyenKey}, sigOther, signature.ErrMismatch},
		{"missing", []string{adyenKey}, "", signature.ErrMissing},
		{"blank", []string{adyenKey}, "  ", signature.ErrMissing},
		{"not base64", []string{adyenKey}, "!!!!" + sigAdyen[4:], signature.ErrMalformed},
		{"too short", []string{adyenKey}, sigAdyen[:20], signature.ErrMalformed},
		{"hex instead of base64", []string{adyenKey}, strings.Repeat("ab", 32), signature.ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := fieldHMAC(t, tc.keys...).Verify(fields, tc.sig)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), "additionalData.hmacSignature", "the error says where the signature is")
			for _, k := range tc.keys {
				require.NotContains(t, strings.ToUpper(err.Error()), k, "never a key in an error")
			}
		})
	}
}

func TestHexKey(t *testing.T) {
	t.Parallel()
	k, err := signature.HexKey("0aFF")
	require.NoError(t, err)
	require.Equal(t, []byte{0x0a, 0xff}, k)
	for in, want := range map[string]string{
		"":            "empty",
		" 0a":         "whitespace",
		"abc":         "odd number",
		"zz":          "not hex",
		"whsec_abcde": "odd number",
		"SECRETSEC0":  "not hex",
	} {
		_, err := signature.HexKey(in)
		require.ErrorContains(t, err, want, "%q", in)
		if in != "" {
			require.NotContains(t, err.Error(), in, "the key is not repeated")
		}
	}
	_, err = signature.NewFieldHMAC("x", ":", nil)
	require.Error(t, err)
	_, err = signature.NewFieldHMAC("x", ":", [][]byte{{}})
	require.Error(t, err)
}

func BenchmarkFieldHMACVerify(b *testing.B) {
	v := fieldHMAC(b, adyenKey)
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(adyenFields, adyenSig); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzFieldHMAC: any fields and signature text are answered without a
// panic, a signature made by SignFields always verifies, and one that
// does not match is never accepted.
func FuzzFieldHMAC(f *testing.F) {
	f.Add("pspReference:originalReference", "merchantAccount", adyenSig)
	f.Add("", "", "")
	f.Add("a", "b", "ipnxGCaUZ4l8TUW75a71_ghd2Fe5ffvX0pV4TLTntIc")
	f.Add("\xff", "::", "====")
	v := fieldHMAC(f, adyenKey)
	f.Fuzz(func(t *testing.T, a, b, sig string) {
		fields := []string{a, b}
		err := v.Verify(fields, sig)
		good, serr := signature.SignFields(adyenKey, ":", fields...)
		require.NoError(t, serr)
		require.NoError(t, v.Verify(fields, good))
		if err != nil {
			require.True(t, isSentinel(err), "%v wraps a sentinel", err)
			return
		}
		require.Equal(t, rawBase64(t, good), rawBase64(t, sig), "only the MAC itself is accepted")
	})
}

// rawBase64 decodes a signature in any of the base64 forms accepted.
func rawBase64(t *testing.T, s string) []byte {
	s = strings.TrimRight(strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimSpace(s)), "=")
	b, err := base64.RawStdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}
