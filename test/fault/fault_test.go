//go:build fault

package fault

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/testenv"
)

// summary prints the test's figures on one line.
func summary(t *testing.T, l *load, v verdict, start time.Time, extra ...string) {
	t.Helper()
	line := fmt.Sprintf("SUMMARY %s: %s %s", t.Name(), l.figures(), v)
	for _, e := range extra {
		line += " " + e
	}
	t.Logf("%s load_wall=%s wall=%s", line, l.wall.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// waitCompleted waits until n callbacks of l were answered 200 (or the load
// ended); n must not lie beyond a pause the load has not been resumed past.
func (l *load) waitCompleted(n int64) {
	l.t.Helper()
	if l.resumes < len(l.spec.Pauses) {
		require.LessOrEqual(l.t, n, int64(l.spec.Pauses[l.resumes]), "waitCompleted(%d): the load pauses before order %d", n, l.spec.Pauses[l.resumes])
	}
	for l.completed.Load() < n {
		select {
		case <-l.done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (l *load) isDone() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// TestWorkerKilledRepeatedly: the worker is SIGKILLed and restarted five
// times while 5,000 payment callbacks come in. Every accepted callback is
// processed exactly once and every notification arrives.
func TestWorkerKilledRepeatedly(t *testing.T) {
	testenv.EachFaultBatchSize(t, testWorkerKilledRepeatedly)
}

func testWorkerKilledRepeatedly(t *testing.T, batchSize int) {
	start := time.Now()
	const n = 5000
	r := newRig(t, rigOpts{BatchSize: batchSize, Orders: n})
	r.startBoth()
	// One part of the orders per kill and one after the last: each part
	// is sent once the worker before it has been killed and restarted, so
	// every kill falls inside the load however long a restart takes.
	const kills = 5
	part := func(i int) int { return n * i / (kills + 1) }
	var pauses []int
	for i := 1; i <= kills; i++ {
		pauses = append(pauses, part(i))
	}
	l := r.load(loadSpec{Rate: 600, Pauses: pauses})

	var lastRestart time.Time
	processedAtStart := 0
	for i := range kills {
		// Kill a worker at work: callbacks coming in (half of this part
		// answered) and processed since it started.
		l.waitCompleted(int64(part(i) + (part(i+1)-part(i))/2))
		waitFor(t, faultLimit, func() bool {
			c, err := r.counts()
			return err == nil && c.success > processedAtStart
		}, fmt.Sprintf("kill %d: the worker processes callbacks", i+1))
		r.wk.Kill()
		r.wk.start()
		lastRestart = time.Now()
		c, err := r.counts()
		require.NoError(t, err)
		processedAtStart = c.success
		t.Logf("kill %d: worker restarted (answered so far %d/%d, processed %d)", i+1, l.completed.Load(), n, c.success)
		l.resume()
	}
	require.False(t, l.isDone() && l.completed.Load() < n, "load ended early: %v", l.firstErr.Load())
	require.Equal(t, kills+1, r.wk.starts())
	l.wait()
	drained := r.drained(2 * time.Minute)
	v := r.verify(time.Minute, l)
	require.Equal(t, 2*n, v.distinct, "distinct downstream message ids")
	summary(t, l, v, start, "kills="+strconv.Itoa(kills),
		"drained_after_last_restart="+secs(drained.Sub(lastRestart)),
		"drained_after_load="+secs(drained.Sub(l.started.Add(l.wall))))
}

// TestBrokerRestart: RabbitMQ (the processes' only broker, the fault
// suite's own node: useFaultBroker) is stopped for at least 10s in the
// middle of the load. The gateway keeps answering 200 (the broker is not on
// the request path), and everything it accepted is processed once RabbitMQ
// is back.
func TestBrokerRestart(t *testing.T) { testenv.EachFaultBatchSize(t, testBrokerRestart) }

func testBrokerRestart(t *testing.T, batchSize int) {
	start := time.Now()
	const n = 2000
	node := useFaultBroker(t)
	r := newRig(t, rigOpts{BatchSize: batchSize, Orders: n})
	r.startBoth()
	// The first half flows while the broker stops (stop_app took 11 s on
	// a busy machine); the third quarter only once the broker refuses
	// connections, the rest as it comes back.
	l := r.load(loadSpec{Rate: 100, Pauses: []int{n / 2, 3 * n / 4}})

	l.waitCompleted(n / 4)
	before, err := r.counts()
	require.NoError(t, err)
	stopping := time.Now()
	stopBroker(t, node)
	down := time.Now()
	t.Logf("broker refusing connections %s after stop_app began (answered %d, processed %d)", secs(down.Sub(stopping)), l.completed.Load(), before.success)
	l.resume()
	holdFault(t, down, 10*time.Second, func() bool { return l.completed.Load() >= 3*n/4 },
		"the callbacks sent while the broker is down are answered 200")
	answeredDuringOutage := len(l.answeredBetween(down, time.Now()))
	during, err := r.counts()
	require.NoError(t, err)
	l.resume()
	restarting := time.Now()
	startBroker(t, node)
	back := time.Now()
	t.Logf("broker back in %s; during the outage (%s) %d callbacks answered 200, %d stored, processed %d->%d",
		secs(back.Sub(restarting)), secs(restarting.Sub(down)), answeredDuringOutage, during.rows, before.success, during.success)
	require.Positive(t, answeredDuringOutage, "the gateway answers 200 while the broker is down")

	// The first callback processed after the restart, and the whole backlog.
	var firstProgress time.Duration
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		c, err := r.counts()
		if err == nil && c.success > during.success {
			firstProgress = time.Since(back)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.wait()
	drained := r.drained(2 * time.Minute)
	v := r.verify(time.Minute, l)
	require.True(t, r.gw.running() && r.wk.running(), "no process restarted")
	require.Equal(t, 1, r.gw.starts())
	require.Equal(t, 1, r.wk.starts())
	summary(t, l, v, start, "outage="+secs(back.Sub(stopping)), "answered_200_during_outage="+strconv.Itoa(answeredDuringOutage),
		"first_processed_after_restart="+secs(firstProgress), "recovery="+secs(drained.Sub(back)))
}

// TestMySQLOutage: the processes lose MySQL for at least 10s during the
// load. The intake answers 503 for what it cannot store and never 200
// without a row; the platform's retries get through once MySQL is back,
// and both processes recover without a restart.
func TestMySQLOutage(t *testing.T) { testenv.EachFaultBatchSize(t, testMySQLOutage) }

func testMySQLOutage(t *testing.T, batchSize int) {
	start := time.Now()
	const n = 2000
	r := newRig(t, rigOpts{BatchSize: batchSize, Orders: n, MySQLProxy: true})
	r.startBoth()
	gwPID, wkPID := r.gw.pid(), r.wk.pid()
	// The second half is sent only once MySQL refuses connections.
	l := r.load(loadSpec{Rate: 250, Pauses: []int{n / 2}})

	l.waitCompleted(n / 4)
	okBefore, s503Before := l.ok.Load(), l.s503.Load()
	r.mysql.Down()
	waitRefused(t, r.mysql.Addr(), "the processes' MySQL")
	down := time.Now()
	l.resume()
	holdFault(t, down, 10*time.Second, func() bool { return l.s503.Load() > s503Before },
		"the intake answers 503 while MySQL is away")
	okDuring, s503During := l.ok.Load()-okBefore, l.s503.Load()-s503Before
	r.mysql.Up(t)
	up := time.Now()
	t.Logf("MySQL down for %s: %d answers 200 (requests already past their INSERT), %d answers 503", secs(up.Sub(down)), okDuring, s503During)
	require.Positive(t, s503During, "the intake answers 503 while MySQL is away")

	// Intake back: the next 200.
	var intakeBack time.Duration
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !l.isDone(); {
		if l.ok.Load() > okBefore+okDuring {
			intakeBack = time.Since(up)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.wait()
	drained := r.drained(2 * time.Minute)
	v := r.verify(time.Minute, l)
	require.True(t, r.gw.running() && r.wk.running(), "both processes survive the outage")
	require.Equal(t, gwPID, r.gw.pid())
	require.Equal(t, wkPID, r.wk.pid())
	require.Equal(t, 1, r.gw.starts())
	require.Equal(t, 1, r.wk.starts())
	summary(t, l, v, start, "outage="+secs(up.Sub(down)), "503s_during_outage="+strconv.FormatInt(s503During, 10),
		"intake_back_after="+secs(intakeBack), "recovery="+secs(drained.Sub(up)))
}

var faultLine = regexp.MustCompile(`fault injection.*"log_id":(\d+)`)

// TestKillBetweenCommitAndAck: the worker dies right after its k-th commit
// (before the outbox publish and the ack), or after the k-th outbox publish
// (before the ack). The restarted worker gets the message again and does
// nothing twice; the outbox rows left behind are published by the relay.
func TestKillBetweenCommitAndAck(t *testing.T) {
	testenv.EachFaultBatchSize(t, testKillBetweenCommitAndAck)
}

func testKillBetweenCommitAndAck(t *testing.T, batchSize int) {
	start := time.Now()
	const batch = 50
	type run struct {
		env string
		k   int
	}
	var runs []run
	for _, env := range []string{"CALLGATE_FAULT_KILL_AFTER_COMMIT", "CALLGATE_FAULT_KILL_BEFORE_ACK"} {
		for _, k := range []int{1, 8, 30} {
			runs = append(runs, run{env, k})
		}
	}
	r := newRig(t, rigOpts{BatchSize: batchSize, Orders: batch * len(runs)})
	r.gw.start()

	var loads []*load
	for i, run := range runs {
		// The callbacks wait on the queue, then a worker with the switch
		// takes them.
		l := r.load(loadSpec{Orders: r.codes[i*batch : (i+1)*batch], First: i * batch})
		l.wait()
		require.Zero(t, l.gaveUp.Load(), "%v", l.firstErr.Load())
		loads = append(loads, l)

		r.wk.launch(fmt.Sprintf("%s=%d", run.env, run.k))
		st := r.wk.waitExit(60 * time.Second)
		require.NotNil(t, st, "%s=%d: the worker did not kill itself\n%s", run.env, run.k, r.wk.tail(20))
		require.True(t, killedBy(st, syscall.SIGKILL), "%s=%d: worker ended with %v, want SIGKILL\n%s", run.env, run.k, st, r.wk.tail(20))
		raw, err := os.ReadFile(r.wk.logPath())
		require.NoError(t, err)
		m := faultLine.FindSubmatch(raw)
		require.NotNil(t, m, "no fault injection line in the worker's log")
		victim, _ := strconv.ParseInt(string(m[1]), 10, 64)

		// The window the switch aims at: committed, and the outbox either
		// not published yet (after commit) or published (before ack).
		require.Equal(t, "SUCCESS", r.status(victim), "callback %d committed before the kill", victim)
		wantOutbox := "PENDING"
		if run.env == "CALLGATE_FAULT_KILL_BEFORE_ACK" {
			wantOutbox = "SENT"
		}
		require.Equal(t, []string{wantOutbox, wantOutbox}, r.outboxStatuses(victim), "outbox of callback %d at the kill", victim)
		c, err := r.counts()
		require.NoError(t, err)

		restart := time.Now()
		r.wk.start()
		drained := r.drained(time.Minute)
		code, took := r.wk.Term(workerShutdownTimeout + 20*time.Second)
		require.Equal(t, 0, code, "clean worker exit")
		require.Equal(t, []string{"SENT", "SENT"}, r.outboxStatuses(victim))
		t.Logf("%s=%d: killed after processing %d of %d, victim log %d; restarted worker drained in %s, stopped in %s",
			run.env, run.k, c.success-i*batch, batch, victim, secs(drained.Sub(restart)), secs(took))
	}

	v := r.verify(time.Minute, loads...)
	total := &load{spec: loadSpec{Orders: r.codes}, done: make(chan struct{})}
	for _, l := range loads {
		total.sent.Add(l.sent.Load())
		total.ok.Add(l.ok.Load())
		total.s503.Add(l.s503.Load())
		total.transport.Add(l.transport.Load())
		total.retries.Add(l.retries.Load())
		total.wall += l.wall
		total.lat = append(total.lat, l.lat...)
	}
	require.Equal(t, 3*batch*len(runs), v.rows+v.outbox, "one row and two outbox rows per callback")
	summary(t, total, v, start, "runs="+strconv.Itoa(len(runs)), "worker_starts="+strconv.Itoa(r.wk.starts()))
}

// status reads a callback's status.
func (r *rig) status(id int64) string {
	r.t.Helper()
	var s string
	require.NoError(r.t, r.db.QueryRow(`SELECT status FROM callback_log WHERE id = ?`, id).Scan(&s))
	return s
}

// outboxStatuses lists a callback's outbox rows' statuses.
func (r *rig) outboxStatuses(id int64) []string {
	r.t.Helper()
	rows, err := r.db.Query(`SELECT status FROM outbox WHERE callback_log_id = ? ORDER BY id`, id)
	require.NoError(r.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(r.t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(r.t, rows.Err())
	return out
}

// TestDuplicateStorm: 1,000 callbacks each sent 5 times at once with the
// same webhook-id: one row and one processing per callback.
func TestDuplicateStorm(t *testing.T) { testenv.EachFaultBatchSize(t, testDuplicateStorm) }

func testDuplicateStorm(t *testing.T, batchSize int) {
	start := time.Now()
	const n, copies = 1000, 5
	r := newRig(t, rigOpts{BatchSize: batchSize, Orders: n})
	r.startBoth()
	l := r.load(loadSpec{Copies: copies})
	l.wait()
	require.EqualValues(t, n, l.completed.Load(), "%v", l.firstErr.Load())
	require.EqualValues(t, n*copies, l.ok.Load())
	// One fresh answer per callback; a copy retried after a transport
	// error may see its own row as a duplicate, never a second fresh one.
	var noFresh, manyFresh int
	for i := range l.fresh {
		switch f := l.fresh[i].Load(); {
		case f == 0:
			noFresh++
		case f > 1:
			manyFresh++
		}
	}
	require.Zero(t, manyFresh, "callbacks answered duplicate:false more than once")
	if l.retries.Load() == 0 {
		require.Zero(t, noFresh, "callbacks never answered duplicate:false")
	}
	v := r.verify(time.Minute, l)
	require.Equal(t, n, r.count(`SELECT COUNT(*) FROM callback_attempt`), "one processing per callback, no other attempt")
	summary(t, l, v, start, "copies="+strconv.Itoa(copies), "all_attempts="+strconv.Itoa(r.count(`SELECT COUNT(*) FROM callback_attempt`)))
}

// TestGracefulStopUnderLoad: SIGTERM to the gateway and the worker while
// callbacks flow. Both exit 0 within their shutdown timeouts; after a
// restart every callback answered 200 is processed.
func TestGracefulStopUnderLoad(t *testing.T) {
	testenv.EachFaultBatchSize(t, testGracefulStopUnderLoad)
}

func testGracefulStopUnderLoad(t *testing.T, batchSize int) {
	start := time.Now()
	const n = 3000
	r := newRig(t, rigOpts{BatchSize: batchSize, Orders: n})
	r.startBoth()
	// The last third is sent only once both processes are gone.
	l := r.load(loadSpec{Rate: 300, Pauses: []int{2 * n / 3}})

	l.waitCompleted(n / 3)
	require.False(t, l.isDone())
	var wg sync.WaitGroup
	var gwCode, wkCode int
	var gwTook, wkTook time.Duration
	wg.Go(func() { gwCode, gwTook = r.gw.Term(gatewayShutdownTimeout + 20*time.Second) })
	wg.Go(func() { wkCode, wkTook = r.wk.Term(workerShutdownTimeout + 20*time.Second) })
	wg.Wait()
	t.Logf("SIGTERM: gateway exit %d in %s, worker exit %d in %s (answered so far %d/%d)",
		gwCode, secs(gwTook), wkCode, secs(wkTook), l.completed.Load(), n)
	require.Equal(t, 0, gwCode, "gateway exit code\n%s", r.gw.tail(20))
	require.Equal(t, 0, wkCode, "worker exit code\n%s", r.wk.tail(20))
	require.LessOrEqual(t, gwTook, gatewayShutdownTimeout, "gateway shutdown within http.shutdown_timeout")
	require.LessOrEqual(t, wkTook, workerShutdownTimeout, "worker shutdown within worker.shutdown_timeout")
	requireCleanStop(t, r.gw.logPath(), "gateway")
	requireCleanStop(t, r.wk.logPath(), "worker")

	// The platform's callbacks meet the stopped gateway (its port
	// refuses them) before it is started again.
	gwAddr := strings.TrimPrefix(r.url, "http://")
	waitRefused(t, gwAddr, "the stopped gateway")
	refusedBefore := l.transport.Load()
	l.resume()
	waitFor(t, faultLimit, func() bool { return l.transport.Load() > refusedBefore },
		"the platform's requests meet the stopped gateway")
	restart := time.Now()
	r.gw.Restart()
	r.wk.Restart()
	l.wait()
	drained := r.drained(2 * time.Minute)
	v := r.verify(time.Minute, l)
	summary(t, l, v, start, "gateway_stop="+secs(gwTook), "worker_stop="+secs(wkTook),
		"recovery="+secs(drained.Sub(restart)))
}

// requireCleanStop checks a stopped process's log for the end of a graceful
// stop and the absence of its failure modes.
func requireCleanStop(t *testing.T, path, name string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(raw)
	require.Contains(t, s, name+": stopped", "%s log ends with a graceful stop", name)
	for _, bad := range []string{"second signal", "shutdown timed out", "shutdown timeout"} {
		require.NotContains(t, s, bad, "%s log", name)
	}
	if strings.Contains(s, "unsent") {
		t.Logf("%s stopped with announcements unsent (left to compensation)", name)
	}
}
