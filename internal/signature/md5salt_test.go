package signature_test

import (
	"crypto/md5"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
)

// Kuaidi100 publishes no vector; this one was computed independently
// (python3 hashlib, PLATFORMS.md section 7): MD5('{"a":1}' + 'salt').
const (
	md5Payload = `{"a":1}`
	md5Salt    = "salt"
	md5Sign    = "B218F90555A22945EC35A666B2C7B040"
)

func md5Verifier(t testing.TB, salts ...string) *signature.MD5Salt {
	t.Helper()
	v, err := signature.NewMD5Salt("sign", salts)
	require.NoError(t, err)
	return v
}

func TestMD5SaltVector(t *testing.T) {
	t.Parallel()
	require.Equal(t, md5Sign, signature.SignMD5Salt(md5Payload, md5Salt))
	v := md5Verifier(t, md5Salt)
	require.NoError(t, v.Verify(md5Payload, md5Sign))
	require.NoError(t, v.Verify(md5Payload, strings.ToLower(md5Sign)), "either case is read")
	require.ErrorIs(t, v.Verify(md5Payload+" ", md5Sign), signature.ErrMismatch)
	require.ErrorIs(t, md5Verifier(t, "salt2").Verify(md5Payload, md5Sign), signature.ErrMismatch)
}

func TestMD5SaltVerify(t *testing.T) {
	t.Parallel()
	const payload = `{"status":"polling","lastResult":{"nu":"YT1"}}`
	sum := md5.Sum([]byte(payload + "new-salt"))
	signNew := strings.ToUpper(hex.EncodeToString(sum[:]))
	require.Equal(t, signNew, signature.SignMD5Salt(payload, "new-salt"), "the helper agrees with crypto/md5")
	signOld := signature.SignMD5Salt(payload, "old-salt")
	tests := []struct {
		name  string
		salts []string
		sign  string
		want  error
	}{
		{"one salt", []string{"new-salt"}, signNew, nil},
		{"rotation: old", []string{"old-salt", "new-salt"}, signOld, nil},
		{"rotation: new", []string{"old-salt", "new-salt"}, signNew, nil},
		{"empty salt signs too", []string{""}, signature.SignMD5Salt(payload, ""), nil},
		{"wrong salt", []string{"new-salt"}, signOld, signature.ErrMismatch},
		{"missing", []string{"new-salt"}, "", signature.ErrMissing},
		{"too short", []string{"new-salt"}, signNew[:31], signature.ErrMalformed},
		{"too long", []string{"new-salt"}, signNew + "0", signature.ErrMalformed},
		{"not hex", []string{"new-salt"}, "G" + signNew[1:], signature.ErrMalformed},
		{"sha256 length", []string{"new-salt"}, strings.Repeat("A", 64), signature.ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := md5Verifier(t, tc.salts...).Verify(payload, tc.sign)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), "sign")
			for _, s := range tc.salts {
				if s != "" {
					require.NotContains(t, err.Error(), s, "never a salt in an error")
				}
			}
		})
	}
	_, err := signature.NewMD5Salt("sign", nil)
	require.Error(t, err)
}

func BenchmarkMD5SaltVerify(b *testing.B) {
	v := md5Verifier(b, md5Salt)
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(md5Payload, md5Sign); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzMD5Salt: any payload and sign text is answered without a panic, the
// right sign always verifies, and only it does.
func FuzzMD5Salt(f *testing.F) {
	f.Add(md5Payload, md5Sign)
	f.Add("", "")
	f.Add("\xff\xfe", strings.Repeat("Z", 32))
	f.Add(`{"nu":"1"}`, strings.ToLower(md5Sign))
	v := md5Verifier(f, md5Salt, "")
	f.Fuzz(func(t *testing.T, payload, sign string) {
		err := v.Verify(payload, sign)
		require.NoError(t, v.Verify(payload, signature.SignMD5Salt(payload, md5Salt)))
		require.NoError(t, v.Verify(payload, signature.SignMD5Salt(payload, "")))
		if err != nil {
			require.True(t, isSentinel(err), "%v wraps a sentinel", err)
			return
		}
		s := strings.ToUpper(strings.TrimSpace(sign))
		require.True(t, s == signature.SignMD5Salt(payload, md5Salt) || s == signature.SignMD5Salt(payload, ""),
			"only the right sign is accepted")
	})
}
