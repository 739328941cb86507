package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkerCarriesNoHTTPFramework: the worker binary serves no HTTP
// routes, so it must not link the gateway's framework. It reaches it only
// by importing a package of the gateway's edge (internal/intake,
// internal/admin); what both sides share lives below them
// (internal/ingest, internal/demo, internal/clientaddr).
func TestWorkerCarriesNoHTTPFramework(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: cannot list the worker's dependencies")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	require.NoError(t, err, "go list -deps ./cmd/worker")
	var gin []string
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/gin-gonic/") || strings.HasPrefix(pkg, "github.com/gin-contrib/") {
			gin = append(gin, pkg)
		}
	}
	require.Empty(t, gin, "go list -deps ./cmd/worker lists the HTTP framework; `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/worker` shows who imports it")
}
