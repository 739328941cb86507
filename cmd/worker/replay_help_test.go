package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/demo"
	"callgate/internal/testenv"
)

// TestBinaryReplayHelpNamesTheTokens: `worker replay -h` says which
// variable holds the admin token and that, unset, the demo token is sent,
// which the gateway `make run` starts (demo mode) accepts.
func TestBinaryReplayHelpNamesTheTokens(t *testing.T) {
	bin := testenv.Self(t)
	_, _, stderr := testenv.Exec(t, bin, nil, "replay", "-h")
	require.Contains(t, stderr, "The admin token comes from CALLGATE_ADMIN_TOKEN.")
	require.Contains(t, stderr, "Unset, the demo token "+demo.AdminToken+" is sent")
	require.Contains(t, stderr, "demo mode (make run, CALLGATE_DEMO=1)")
}
