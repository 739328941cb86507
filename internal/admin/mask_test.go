package admin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMaskPayload(t *testing.T) {
	t.Parallel()
	in := []byte(`{"orderCode":"O-1","card":{"number":"4111111111111111","cvc":"123"},"phone":"+4915112345678","amount":12345678901234567890}`)
	out := maskPayload(in, []string{"card.number", "card.cvc", "phone", "missing.path", "orderCode.nope"})
	require.JSONEq(t, `{"orderCode":"O-1","card":{"number":"****1111","cvc":"****"},"phone":"****5678","amount":12345678901234567890}`, string(out))
	require.Equal(t, in, maskPayload(in, nil), "no masks: untouched")
	require.Equal(t, []byte("not json"), maskPayload([]byte("not json"), []string{"a"}))
}
