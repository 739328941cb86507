//go:build fault

package fault

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// proc is one gateway or worker child process, restartable. Each start
// writes its stdout and stderr to its own file in the test's temp dir; the
// tails are printed when the test fails.
type proc struct {
	t    *testing.T
	name string
	bin  string
	args []string
	env  []string

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{} // closed when the current process has exited
	state *os.ProcessState
	logs  []string
	// ready, if set, is waited for after each start.
	ready func(p *proc) error
}

// newProc prepares a process; start runs it. extraEnv is added to the
// parent's environment (minus any CALLGATE_* variable, so the shell running
// the tests cannot change what the processes see).
func newProc(t *testing.T, name, bin string, extraEnv []string, args ...string) *proc {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CALLGATE_") {
			env = append(env, kv)
		}
	}
	p := &proc{t: t, name: name, bin: bin, args: args, env: append(env, extraEnv...)}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			p.dumpLogs()
		}
	})
	return p
}

// start runs the process with extraEnv added for this start only, and
// waits for it to be ready if a readiness check is set.
func (p *proc) start(extraEnv ...string) {
	p.t.Helper()
	p.launch(extraEnv...)
	if p.ready != nil {
		if err := p.ready(p); err != nil {
			require.FailNow(p.t, p.name+" did not become ready", "%v\n%s", err, p.tail(20))
		}
	}
}

// launch runs the process without waiting for readiness (a process given a
// fault switch may be dead before it would be ready).
func (p *proc) launch(extraEnv ...string) {
	p.t.Helper()
	p.mu.Lock()
	if p.cmd != nil && !p.exitedLocked() {
		p.mu.Unlock()
		require.FailNow(p.t, p.name+" is already running")
	}
	logPath := filepath.Join(p.t.TempDir(), fmt.Sprintf("%s-%d.log", p.name, len(p.logs)+1))
	f, err := os.Create(logPath)
	if err != nil {
		p.mu.Unlock()
		require.NoError(p.t, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(append([]string(nil), p.env...), extraEnv...)
	cmd.Stdout = f
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		f.Close()
		p.mu.Unlock()
		require.NoError(p.t, err, "starting "+p.name)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.state = cmd, done, nil
	p.logs = append(p.logs, logPath)
	go func() {
		_ = cmd.Wait()
		f.Close()
		p.mu.Lock()
		if p.cmd == cmd {
			p.state = cmd.ProcessState
		}
		p.mu.Unlock()
		close(done)
	}()
	p.mu.Unlock()
}

func (p *proc) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// running reports whether the current process is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

// pid of the current process.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// starts is how many times the process was started.
func (p *proc) starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.logs)
}

// logPath is the log file of the current (or last) process.
func (p *proc) logPath() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.logs) == 0 {
		return ""
	}
	return p.logs[len(p.logs)-1]
}

// Kill sends SIGKILL and waits for the process to be gone. A process
// already gone is left alone.
func (p *proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Term sends SIGTERM and waits up to limit for the exit. It returns the exit
// code (-1 when a signal ended it) and how long the exit took. Past limit
// the process is SIGKILLed and the test fails.
func (p *proc) Term(limit time.Duration) (code int, took time.Duration) {
	p.t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	require.NotNil(p.t, cmd, p.name+" never started")
	start := time.Now()
	require.NoError(p.t, cmd.Process.Signal(syscall.SIGTERM), "SIGTERM to "+p.name)
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		require.FailNow(p.t, fmt.Sprintf("%s did not exit within %s of SIGTERM", p.name, limit), p.tail(30))
	}
	return cmd.ProcessState.ExitCode(), time.Since(start)
}

// waitExit waits up to limit for the current process to exit by itself
// (a fault switch) and returns its state, or nil on timeout.
func (p *proc) waitExit(limit time.Duration) *os.ProcessState {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return cmd.ProcessState
	case <-time.After(limit):
		return nil
	}
}

// Restart kills the process if it still runs and starts it again.
func (p *proc) Restart(extraEnv ...string) {
	p.t.Helper()
	p.Kill()
	p.start(extraEnv...)
}

// killedBy reports whether st ended by signal sig.
func killedBy(st *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// tail returns the last n lines of the current log.
func (p *proc) tail(n int) string {
	return tailFile(p.logPath(), n)
}

// dumpLogs prints the tail of the last logs of every start.
func (p *proc) dumpLogs() {
	p.mu.Lock()
	logs := append([]string(nil), p.logs...)
	p.mu.Unlock()
	if len(logs) > 3 {
		logs = logs[len(logs)-3:]
	}
	for _, l := range logs {
		p.t.Logf("---- tail of %s ----\n%s", filepath.Base(l), tailFile(l, 25))
	}
}

func tailFile(path string, n int) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 4*n {
			lines = lines[len(lines)-n:]
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freeAddr picks a free loopback port for the gateway.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// readyzCheck waits until the gateway's /readyz answers 200.
func readyzCheck(url string, limit time.Duration) func(p *proc) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return func(p *proc) error {
		deadline := time.Now().Add(limit)
		last := errors.New("no answer yet")
		for time.Now().Before(deadline) {
			if !p.running() {
				return fmt.Errorf("exited: %v", p.waitExit(0))
			}
			resp, err := client.Get(url + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				last = fmt.Errorf("/readyz answered %d", resp.StatusCode)
			} else {
				last = err
			}
			time.Sleep(50 * time.Millisecond)
		}
		return last
	}
}

// startedCheck waits until the worker logged that it consumes every kind's
// queue.
func startedCheck(limit time.Duration) func(p *proc) error {
	return func(p *proc) error {
		deadline := time.Now().Add(limit)
		for time.Now().Before(deadline) {
			if !p.running() {
				return fmt.Errorf("exited: %v", p.waitExit(0))
			}
			b, _ := os.ReadFile(p.logPath())
			if strings.Count(string(b), `worker: consuming`) >= 2 {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return errors.New("no 'worker: consuming' lines in its log")
	}
}
