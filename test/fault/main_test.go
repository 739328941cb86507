//go:build fault

// Package fault holds callgate's fault tests: the real gateway and worker
// binaries run as child processes against the real MariaDB and RabbitMQ,
// under load, while processes are killed, the broker is restarted and MySQL
// is taken away. Each test ends with the same check: every callback a
// platform got a 200 for was processed exactly once in effect, and every
// downstream notification it caused arrived at least once.
//
// The tests restart RabbitMQ, so they never run in parallel with other
// tests (build tag fault, run with -p 1 after the rest of the suite):
//
//	go test -tags fault -count=1 -p 1 -timeout 12m ./test/fault/
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
	// A previous run killed in the middle of TestBrokerRestart may have
	// left the broker stopped.
	// (The HA scenarios' nodes are scripts/ha.sh's business.)
	if os.Getenv("CALLGATE_HA_MQ_PORTS") != "" {
		return m.Run()
	}
	if err := ensureBroker(); err != nil {
		fmt.Fprintln(os.Stderr, "fault: RabbitMQ is not available:", err)
		return 1
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
