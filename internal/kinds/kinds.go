// Package kinds is the one place that lists the callback kinds this build
// knows and their handlers. The gateway uses the names to validate sources
// and declare one queue per kind; the worker runs the handlers.
//
// Adding a kind: write a callback.Handler in its own package and register
// it below. Nothing else changes.
package kinds

import (
	"callgate/internal/callback"
	"callgate/internal/logistics"
	"callgate/internal/payment"
)

// Registry returns the handlers of every known kind.
func Registry() *callback.Registry {
	r := callback.NewRegistry()
	r.Register(callback.KindPayment, payment.Handler{})
	r.Register(callback.KindLogistics, logistics.Handler{})
	return r
}

// Names returns the known kinds.
func Names() []string { return Registry().Kinds() }
