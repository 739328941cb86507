// Package kinds is the one place that lists the callback kinds this build
// knows. The gateway uses it to validate sources and declare one queue per
// kind; the worker to consume them.
package kinds

import "callgate/internal/callback"

// Names returns the known kinds.
func Names() []string {
	return []string{callback.KindPayment, callback.KindLogistics}
}
