//go:build fault

// Package fault holds callgate's fault tests: the real gateway and worker
// binaries run as child processes against the real MariaDB and RabbitMQ,
// under load, while processes are killed, the broker is restarted and MySQL
// is taken away. Each test ends with the same check: every callback a
// platform got a 200 for was processed exactly once in effect, and every
// downstream notification it caused arrived at least once.
//
// The tests load the machine and one of them stops a RabbitMQ broker of
// its own (scripts/ha.sh up fault; never the one on 5672), so they run
// one at a time, after the rest of the suite (build tag fault; make test
// runs the HA scenarios beside them, on servers of their own):
//
//	make test-faults
package fault

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Paths of the binaries TestMain built.
var (
	gatewayBin string
	workerBin  string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault: finding the module root:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "callgate-fault-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	gatewayBin = filepath.Join(dir, "gateway")
	workerBin = filepath.Join(dir, "worker")
	// No -race: the load is the point, and the race detector slows the
	// processes down several times. -tags fault compiles the worker's
	// kill switches (cmd/worker/fault.go), which production builds lack.
	for bin, pkg := range map[string]string{gatewayBin: "./cmd/gateway", workerBin: "./cmd/worker"} {
		start := time.Now()
		cmd := exec.Command(goTool(), "build", "-trimpath", "-tags", "fault", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "fault: go build %s: %v\n%s", pkg, err, out)
			return 1
		}
		fmt.Fprintf(os.Stderr, "fault: built %s in %s\n", pkg, time.Since(start).Round(time.Millisecond))
	}
	return m.Run()
}

// moduleRoot is the directory of go.mod: from this file's path, checked.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if ok {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return filepath.Abs(root)
		}
	}
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}
