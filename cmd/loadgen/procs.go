package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// child is a gateway or worker process started by the benchmark.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

func startChild(name, bin string, args, env []string, logPath string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = f
	cmd.Stderr = f
	// Killed with us if loadgen dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("error starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// pidOr0 is pid, or 0 for no process.
func (c *child) pidOr0() int {
	if c == nil {
		return 0
	}
	return c.pid()
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits; past timeout it kills.
func (c *child) stop(timeout time.Duration) {
	if c == nil || c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// logTail returns the last lines of the child's log.
func (c *child) logTail(n int) string {
	raw, err := os.ReadFile(c.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitHTTP polls url until it answers 200, the child exits, or timeout.
func waitHTTP(ctx context.Context, url string, c *child, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cl := &http.Client{Timeout: time.Second}
	var last string
	for time.Now().Before(deadline) {
		if c.exited() {
			return fmt.Errorf("%s exited (%w) before it was ready; its log (%s) ends:\n%s", c.name, c.err, c.logPath, c.logTail(20))
		}
		resp, err := cl.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready at %s within %s (last answer: %s); its log (%s) ends:\n%s", c.name, url, timeout, last, c.logPath, c.logTail(20))
}

// freePort returns a loopback TCP port nobody listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ---- /proc, read with github.com/prometheus/procfs -----------------------

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports: the
// unit of a process's reaped children's CPU (cutime, cstime), which procfs
// leaves in ticks.
const clockTicks = 100

// procCPU returns the CPU seconds (user and system) pid has used.
func procCPU(pid int) (float64, bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, false
	}
	st, err := p.Stat()
	if err != nil {
		return 0, false
	}
	return st.CPUTime(), true
}

// procMem returns VmRSS and VmHWM of pid in KiB.
func procMem(pid int) (rss, hwm int64, ok bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0, false
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, 0, false
	}
	return int64(st.VmRSS / 1024), int64(st.VmHWM / 1024), st.VmRSS > 0
}

// machineCPU returns the CPU seconds of all cores since boot: busy, in
// total, and of those in hard and soft interrupts (loopback networking is
// mostly softirq), which no process is charged for. Guest time is already
// in user and nice.
func machineCPU() (busy, total, irq float64) {
	st, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0, 0
	}
	s, err := st.Stat()
	if err != nil {
		return 0, 0, 0
	}
	c := s.CPUTotal
	total = c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	return total - c.Idle - c.Iowait, total, c.IRQ + c.SoftIRQ
}

// allProcCPU returns the CPU seconds of every process, by pid, with its
// comm.
func allProcCPU() map[int]procUse {
	out := map[int]procUse{}
	procs, err := procfs.AllProcs()
	if err != nil {
		return out
	}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue
		}
		out[p.PID] = procUse{comm: st.Comm, cpu: st.CPUTime(), children: float64(st.CUTime+st.CSTime) / clockTicks}
	}
	return out
}

// procUse is a process's CPU seconds, its own and its reaped children's.
type procUse struct {
	comm     string
	cpu      float64
	children float64
}

// findProc returns the pid of the oldest process whose comm is name and,
// if mark is not empty, whose command line or environment contains mark
// (the RabbitMQ server, not a rabbitmqctl that also runs as beam.smp; one
// node of a cluster on one machine by its RABBITMQ_NODENAME).
func findProc(name, mark string) int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0
	}
	best := 0
	for _, p := range procs {
		if best > 0 && p.PID > best {
			continue
		}
		if comm, err := p.Comm(); err != nil || comm != name {
			continue
		}
		if mark != "" && !procMentions(p, mark) {
			continue
		}
		best = p.PID
	}
	return best
}

// Usage is one process's share of a measured window.
type Usage struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPercent is of one core (200 = both cores of a 2-core machine).
	CPUPercent float64 `json:"cpu_percent"`
	// PeakRSSMB: VmHWM for the gateway and worker (peak over the process's
	// life), the largest VmRSS sampled in the window for the others.
	PeakRSSMB float64 `json:"peak_rss_mb"`
}

// Resources is the CPU split of one measured window.
type Resources struct {
	WindowSeconds float64          `json:"window_seconds"`
	Procs         map[string]Usage `json:"procs"`
	// MachineBusy is all CPU time used on the machine (all cores, from
	// /proc/stat); Other is what none of the processes above used
	// (other engineers' builds and tests, the kernel's softirqs, ...).
	MachineBusy Usage `json:"machine_busy"`
	Other       Usage `json:"other"`
	// IRQ: hard and soft interrupts (part of Other).
	IRQ Usage `json:"irq"`
	// OtherTop: the busiest untracked processes, by command name (part
	// of Other), e.g. "go 12.3s".
	OtherTop []string `json:"other_top,omitempty"`
	// MariaDB: increase of MariaDB's global status counters over the
	// window (the whole server: other databases' work is included).
	MariaDB map[string]float64 `json:"mariadb_status,omitempty"`
	// ForeignQueryPct: share of once-a-second samples that found a query
	// of another database running in MariaDB (someone else's load inside
	// mariadbd's CPU and counters); ForeignDBs names them.
	ForeignQueryPct float64  `json:"foreign_query_pct"`
	ForeignDBs      []string `json:"foreign_dbs,omitempty"`
}

// meter samples the CPU and memory of named processes over a window.
type meter struct {
	procs  map[string]int
	hwm    map[string]bool // report VmHWM for these (fresh processes)
	start  map[string]float64
	peak   map[string]int64
	mstart float64
	istart float64
	all    map[int]procUse
	t0     time.Time
	mu     sync.Mutex
	stop   chan struct{}
	done   chan struct{}
	status func() map[string]float64
	s0     map[string]float64
	// foreign returns the other databases with a query running now.
	foreign  func() []string
	ticks    int
	fsamples int
	fhits    int
	fdbs     map[string]bool
}

func startMeter(procs map[string]int, hwm map[string]bool, status func() map[string]float64, foreign func() []string) *meter {
	m := &meter{procs: map[string]int{}, hwm: hwm, start: map[string]float64{}, peak: map[string]int64{},
		stop: make(chan struct{}), done: make(chan struct{}), status: status, foreign: foreign, fdbs: map[string]bool{}}
	if status != nil {
		m.s0 = status()
	}
	for name, pid := range procs {
		if pid <= 0 {
			continue
		}
		if t, ok := procCPU(pid); ok {
			m.procs[name] = pid
			m.start[name] = t
		}
	}
	m.all = allProcCPU()
	m.mstart, _, m.istart = machineCPU()
	m.t0 = time.Now()
	m.sample()
	go func() {
		defer close(m.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample()
				if m.ticks++; m.foreign != nil && m.ticks%4 == 0 {
					dbs := m.foreign()
					m.mu.Lock()
					m.fsamples++
					if len(dbs) > 0 {
						m.fhits++
						for _, d := range dbs {
							m.fdbs[d] = true
						}
					}
					m.mu.Unlock()
				}
			}
		}
	}()
	return m
}

func (m *meter) sample() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, pid := range m.procs {
		if rss, _, ok := procMem(pid); ok && rss > m.peak[name] {
			m.peak[name] = rss
		}
	}
}

func (m *meter) finish() Resources {
	m.sample()
	close(m.stop)
	<-m.done
	secs := time.Since(m.t0).Seconds()
	r := Resources{WindowSeconds: round(secs, 2), Procs: map[string]Usage{}}
	m.mu.Lock()
	if m.fsamples > 0 {
		r.ForeignQueryPct = round(100*float64(m.fhits)/float64(m.fsamples), 0)
		for d := range m.fdbs {
			r.ForeignDBs = append(r.ForeignDBs, d)
		}
		sort.Strings(r.ForeignDBs)
	}
	m.mu.Unlock()
	if m.status != nil && m.s0 != nil {
		if s1 := m.status(); s1 != nil {
			r.MariaDB = map[string]float64{}
			for k, v := range s1 {
				r.MariaDB[k] = v - m.s0[k]
			}
		}
	}
	var tracked float64
	for name, pid := range m.procs {
		t, ok := procCPU(pid)
		if !ok {
			continue
		}
		cpu := t - m.start[name]
		tracked += cpu
		peak := m.peak[name]
		if m.hwm[name] {
			if _, hwm, ok := procMem(pid); ok && hwm > peak {
				peak = hwm
			}
		}
		r.Procs[name] = Usage{CPUSeconds: round(cpu, 2), CPUPercent: round(100*cpu/secs, 1), PeakRSSMB: round(float64(peak)/1024, 1)}
	}
	mend, _, iend := machineCPU()
	busy := mend - m.mstart
	irq := iend - m.istart
	r.IRQ = Usage{CPUSeconds: round(irq, 2), CPUPercent: round(100*irq/secs, 1)}
	ours := map[int]bool{}
	for _, pid := range m.procs {
		ours[pid] = true
	}
	byComm := map[string]float64{}
	for pid, now := range allProcCPU() {
		if ours[pid] {
			continue
		}
		before, ok := m.all[pid]
		if ok && before.comm == now.comm && now.cpu >= before.cpu {
			byComm[now.comm] += now.cpu - before.cpu
			// Short-lived processes (compilers, test binaries) that ran
			// and exited in the window show up in their parent.
			if now.children > before.children {
				byComm[now.comm+" (exited children)"] += now.children - before.children
			}
		} else if !ok {
			byComm[now.comm] += now.cpu // started in the window
		}
	}
	type kv struct {
		comm string
		cpu  float64
	}
	var top []kv
	for c, t := range byComm {
		if t > 0 {
			top = append(top, kv{c, t})
		}
	}
	sort.Slice(top, func(i, j int) bool { return top[i].cpu > top[j].cpu })
	for _, e := range top[:min(len(top), 4)] {
		if e.cpu >= 0.1 {
			r.OtherTop = append(r.OtherTop, fmt.Sprintf("%s %.1fs", e.comm, e.cpu))
		}
	}
	r.MachineBusy = Usage{CPUSeconds: round(busy, 2), CPUPercent: round(100*busy/secs, 1)}
	other := max(busy-tracked, 0)
	r.Other = Usage{CPUSeconds: round(other, 2), CPUPercent: round(100*other/secs, 1)}
	return r
}

// peakHWM reads a live process's VmHWM in MB.
func peakHWM(pid int) (float64, error) {
	_, hwm, ok := procMem(pid)
	if !ok {
		return 0, errors.New("process gone")
	}
	return round(float64(hwm)/1024, 1), nil
}

// findDB returns the pid of MariaDB (or MySQL).
func findDB(mark string) int {
	if p := findProc("mariadbd", mark); p > 0 {
		return p
	}
	return findProc("mysqld", mark)
}

// procMentions reports whether process p's command line, or else its
// environment, contains mark: a RabbitMQ node's name is in its
// environment (RABBITMQ_NODENAME), not on its command line.
func procMentions(p procfs.Proc, mark string) bool {
	if args, err := p.CmdLine(); err == nil && strings.Contains(strings.Join(args, " "), mark) {
		return true
	}
	env, err := p.Environ()
	return err == nil && strings.Contains(strings.Join(env, " "), mark)
}
