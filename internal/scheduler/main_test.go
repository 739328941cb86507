package scheduler_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is still
// running once they are done (a connection, a loop or a timer not stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
