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
	"callgate/internal/worker"
)

// Registry returns the handlers of every known kind, configured from the
// worker's settings (worker.order_grace, the sources' payment_currency).
func Registry(set worker.Settings) *callback.Registry {
	currencies := map[string]string{}
	for _, s := range set.Sources {
		if s.PaymentCurrency != "" {
			currencies[s.Name] = s.PaymentCurrency
		}
	}
	r := callback.NewRegistry()
	r.Register(callback.KindPayment, payment.Handler{OrderGrace: set.Worker.WithDefaults().OrderGrace, Currencies: currencies})
	r.Register(callback.KindLogistics, logistics.Handler{})
	return r
}

// Names returns the known kinds.
func Names() []string { return Registry(worker.Settings{}).Kinds() }
