// Package demo holds what demo mode (CALLGATE_DEMO=1, make run) publishes
// and how to recognise it: the demo admin token. It is a package of its own
// so that the config, the operator surface (internal/admin,
// internal/console), the gateway's banner and the worker's terminal
// commands name one value without importing one another. The demo
// sources' secrets are internal/source's (source.DemoSecrets).
package demo

import "strings"

// AdminToken is the admin token of demo mode: with CALLGATE_DEMO=1 and no
// admin.token (nor single sign-on) configured, the gateway accepts it, so
// `make run` opens the console and `bin/worker replay` at once. It is
// published (docs/getting-started.md), so it is refused outside demo mode,
// as the demo sources' secrets are (config.Validate).
const AdminToken = "demo:" + adminSecret + ":operator"

const adminSecret = "callgate-demo-admin"

// HoldsAdminToken reports whether the admin.token setting s holds the demo
// token's secret, in any of its forms.
func HoldsAdminToken(s string) bool { return strings.Contains(s, adminSecret) }
