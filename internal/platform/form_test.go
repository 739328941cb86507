package platform_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// TestFormLimitsBeforeParsing: a form body over the field count, or with
// a key or value over its length, is refused by one pass over its bytes,
// before any of it is decoded or sorted for the signature, with an error
// naming the limit; a real notification's shape passes.
func TestFormLimitsBeforeParsing(t *testing.T) {
	t.Parallel()
	var many strings.Builder // 1 MiB of empty fields: k0=&k1=&...
	for i := 0; many.Len() < 1<<20; i++ {
		fmt.Fprintf(&many, "k%d=&", i)
	}
	cases := map[string]struct {
		body string
		want string
	}{
		"1 MiB of empty fields": {many.String(), fmt.Sprintf("more than %d parameters", platform.MaxFormFields)},
		"201 fields":            {strings.TrimSuffix(strings.Repeat("k=v&", platform.MaxFormFields+1), "&"), "more than 200 parameters (the limit)"},
		"a long key":            {strings.Repeat("k", platform.MaxFormKeyLen+1) + "=v", "a parameter name is longer than 128 bytes (the limit)"},
		"a long key, no '='":    {"a=1&" + strings.Repeat("k", platform.MaxFormKeyLen+1), "longer than 128 bytes"},
		"a long value":          {"sign=x&param=" + strings.Repeat("v", platform.MaxFormValueLen+1), `the value of "param" is longer than 524288 bytes (the limit)`},
	}
	for name, c := range cases {
		_, err := platform.ParseForm([]byte(c.body))
		require.ErrorContains(t, err, c.want, name)
	}
	ok := strings.TrimSuffix(strings.Repeat("k=v&", platform.MaxFormFields), "&")
	_, err := platform.ParseForm([]byte(ok))
	require.ErrorContains(t, err, "appears twice", "200 fields pass the limit and reach the parser")
	f, err := platform.ParseForm([]byte("sign=x&param=" + strings.Repeat("v", platform.MaxFormValueLen) + "&" + strings.Repeat("k", platform.MaxFormKeyLen) + "="))
	require.NoError(t, err, "a key and a value at their limits pass")
	require.Len(t, f, 3)
}

// TestFormBombIsRefusedCheaply: a signed-looking form body of a hundred
// thousand fields sent to Kuaidi100 and Alipay is refused with 400 (the
// reason names the limit where the platform's answer has room for it),
// and nothing is stored.
func TestFormBombIsRefusedCheaply(t *testing.T) {
	p := testenv.StartPlatform(t, "kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}},
		testenv.WithPlatform("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(testenv.RSAKeys()[0])}}, AppID: alipayAppID}))
	bomb := []byte("sign=AAAA&param=%7B%7D&" + strings.Repeat("x=&", 300<<10/3))
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	a := p.Post(t, "kuaidi100", bomb, h)
	require.Equal(t, http.StatusBadRequest, a.Status, string(a.Body))
	require.Contains(t, string(a.Body), `"result":false`)
	require.Contains(t, string(a.Body), "more than 200 parameters (the limit)")
	a = p.Post(t, "alipay", bomb, h)
	require.Equal(t, http.StatusBadRequest, a.Status)
	require.Equal(t, "fail", string(a.Body), "Alipay's own failure answer")
	require.Zero(t, p.Callbacks(t, "kuaidi100")+p.Callbacks(t, "alipay"))
}
