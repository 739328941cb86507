//go:build !fault

package main

import (
	"log/slog"

	"callgate/internal/worker"
)

// faultHooks are the fault suite's kill switches; a build without the
// fault tag (every build but the fault suite's) has none.
func faultHooks(*slog.Logger) worker.Hooks { return worker.Hooks{} }
