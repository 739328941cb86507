package kinds_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/kinds"
	"callgate/internal/worker"
)

// TestEveryKindChecksItsEventAtIntake: the intake refuses a configured
// source's body that its kind's handler could not read only if the handler
// says how it reads one (callback.EventChecker); a kind added without it
// would take a wrongly typed field with a 200 and FAIL it later.
func TestEveryKindChecksItsEventAtIntake(t *testing.T) {
	t.Parallel()
	reg := kinds.Registry(worker.Settings{})
	require.NotEmpty(t, reg.Kinds())
	for _, kind := range reg.Kinds() {
		h, _ := reg.Handler(kind)
		_, ok := h.(callback.EventChecker)
		require.True(t, ok, "the %s handler is no callback.EventChecker", kind)
		require.Error(t, reg.CheckEvent(kind, []byte(`{"orderCode":1,"waybillNo":1}`)), kind)
	}
}
