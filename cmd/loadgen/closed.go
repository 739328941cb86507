package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"callgate/internal/signature"
	"callgate/internal/store"
)

// WindowStats are the answers of a closed-loop phase's warm-up or measured
// window (by completion time).
type WindowStats struct {
	Seconds         float64 `json:"seconds"`
	OKPerSecond     float64 `json:"ok_per_second"`
	OK              int     `json:"ok"`
	Duplicates      int     `json:"duplicates"`
	Non2xx          int     `json:"non_2xx"`
	TransportErrors int     `json:"transport_errors"`
	Latency         Latency `json:"latency"`
}

// count adds one answer's outcome to the window's tallies.
func (s *WindowStats) count(out outcome) {
	switch out {
	case outAccepted:
		s.OK++
	case outDuplicate:
		s.Duplicates++
	case outNon2xx:
		s.Non2xx++
	case outTransport:
		s.TransportErrors++
	}
}

// Errors is what went wrong, all phase long.
func (w WindowStats) Errors() int { return w.Non2xx + w.TransportErrors + w.Duplicates }

// Verify compares what the gateway answered with what it stored and announced.
type Verify struct {
	// Accepted: 200 answers (duplicate false) over the whole phase,
	// warm-up and tail included.
	Accepted int `json:"accepted"`
	// RowsInDB: callback_log rows with this phase's event-id prefix.
	RowsInDB  int  `json:"rows_in_db"`
	RowsMatch bool `json:"rows_match"`
	// Announced: what <prefix>.payment held once the announcer caught up
	// (intake phases, no worker running).
	Announced *AnnounceCheck `json:"announced,omitempty"`
	// Announcements: the gateway's callgate_announcements_total by result.
	Announcements map[string]float64 `json:"announcements,omitempty"`
}

// ClosedPhase is a closed-loop phase: baseline or intake.
type ClosedPhase struct {
	Name        string      `json:"name"`
	What        string      `json:"what"`
	Concurrency int         `json:"concurrency"`
	Warmup      WindowStats `json:"warmup"`
	Measured    WindowStats `json:"measured"`
	// Total: every answer of the phase (warm-up, window and the tail of
	// requests in flight at the end).
	Total       WindowStats `json:"total"`
	FirstErrors []string    `json:"first_errors,omitempty"`
	// RatioToBaseline: Measured.OKPerSecond over the baseline's.
	RatioToBaseline float64   `json:"ratio_to_baseline,omitempty"`
	Verify          Verify    `json:"verify"`
	Resources       Resources `json:"resources"`
	GatewayRSSMB    float64   `json:"gateway_peak_rss_mb,omitempty"`
	CPUProfile      string    `json:"cpu_profile,omitempty"`
}

type closedRec struct {
	end time.Duration // since t0
	lat time.Duration
	out outcome
}

type closedResult struct {
	recs   []closedRec
	lastOK time.Time
	// ids: the log ids the 200s answered (0 when an answer carried none).
	ids       []int64
	errs      []string
	resources Resources
}

// closedLoop runs conc goroutines calling fn with consecutive numbers for
// warmup+dur; the CPU of procs is metered over the measured window. fn
// returns the outcome and, for a 200, the log id it answered.
func (b *bench) closedLoop(ctx context.Context, conc int, procs map[string]int, hwm map[string]bool,
	fn func(n int) (outcome, int64, error)) closedResult {
	var (
		seq    atomic.Int64
		mu     sync.Mutex
		res    closedResult
		wg     sync.WaitGroup
		lastOK atomic.Int64
	)
	t0 := time.Now()
	end := t0.Add(b.o.warmup + b.o.duration)
	perWorker := make([][]closedRec, conc)
	perWorkerIDs := make([][]int64, conc)
	for w := range conc {
		wg.Go(func() {
			recs := make([]closedRec, 0, 4096)
			ids := make([]int64, 0, 4096)
			for ctx.Err() == nil && time.Now().Before(end) {
				n := int(seq.Add(1) - 1)
				start := time.Now()
				out, id, err := fn(n)
				now := time.Now()
				recs = append(recs, closedRec{end: now.Sub(t0), lat: now.Sub(start), out: out})
				if out == outAccepted {
					ids = append(ids, id)
					for {
						prev := lastOK.Load()
						if now.UnixNano() <= prev || lastOK.CompareAndSwap(prev, now.UnixNano()) {
							break
						}
					}
				}
				if err != nil {
					mu.Lock()
					if len(res.errs) < 5 {
						res.errs = append(res.errs, err.Error())
					}
					mu.Unlock()
				}
			}
			perWorker[w], perWorkerIDs[w] = recs, ids
		})
	}
	// Meter the measured window.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t0.Add(b.o.warmup))):
	}
	m := startMeter(procs, hwm, b.dbStatus, b.foreignQueries)
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(end)):
	}
	res.resources = m.finish()
	wg.Wait()
	for w, r := range perWorker {
		res.recs = append(res.recs, r...)
		res.ids = append(res.ids, perWorkerIDs[w]...)
	}
	if ns := lastOK.Load(); ns > 0 {
		res.lastOK = time.Unix(0, ns)
	}
	return res
}

// windows splits the records into warm-up, measured window and total.
func (b *bench) windows(recs []closedRec) (warm, measured, total WindowStats) {
	var lw, lm, lt []time.Duration
	add := func(s *WindowStats, lats *[]time.Duration, r closedRec) {
		s.count(r.out)
		*lats = append(*lats, r.lat)
	}
	for _, r := range recs {
		switch {
		case r.end < b.o.warmup:
			add(&warm, &lw, r)
		case r.end < b.o.warmup+b.o.duration:
			add(&measured, &lm, r)
		}
		add(&total, &lt, r)
	}
	warm.Latency, measured.Latency, total.Latency = summarize(lw), summarize(lm), summarize(lt)
	warm.Seconds, measured.Seconds = b.o.warmup.Seconds(), b.o.duration.Seconds()
	if warm.Seconds > 0 {
		warm.OKPerSecond = round(float64(warm.OK)/warm.Seconds, 1)
	}
	measured.OKPerSecond = round(float64(measured.OK)/measured.Seconds, 1)
	return warm, measured, total
}

// baseProcs are the processes every window meters. MariaDB and RabbitMQ
// are looked up again each time: someone may have restarted them.
func (b *bench) baseProcs() map[string]int {
	if p := findDB(b.o.dbMark); p > 0 {
		b.mariadbPID = p
	}
	if p := findProc("beam.smp", b.o.mqMark); p > 0 {
		b.rabbitPID = p
	}
	return map[string]int{"mariadbd": b.mariadbPID, "beam.smp": b.rabbitPID, "loadgen": os.Getpid()}
}

// baselineSQL is the raw one-row INSERT the intake's cost is compared with
// (the intake's own statement before callback_event, migration 024).
const baselineSQL = `INSERT INTO callback_log
 (source, kind, event_id, business_key, status, attempts, payload, headers, trace_id, received_at, next_attempt_at)
 VALUES (?, ?, ?, ?, 'PENDING', 0, ?, ?, ?, ?, ?)
 ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`

// baseline: one autocommit INSERT per callback, straight from Go.
func (b *bench) baseline(ctx context.Context) (*ClosedPhase, error) {
	ph := &ClosedPhase{Name: "baseline", Concurrency: b.o.concurrency,
		What: fmt.Sprintf("raw ceiling: %d goroutines, one autocommit INSERT per callback (the intake's statement) via database/sql, interpolateParams=true; no HTTP, signature or broker", b.o.concurrency)}
	b.logf("baseline: %d goroutines x autocommit INSERT, warm-up %s, measuring %s", b.o.concurrency, b.o.warmup, b.o.duration)
	norm, err := store.NormalizeDSN(b.dsn, 2*time.Second)
	if err != nil {
		return ph, err
	}
	db, err := sql.Open("mysql", norm)
	if err != nil {
		return ph, err
	}
	defer db.Close()
	db.SetMaxOpenConns(b.o.concurrency)
	db.SetMaxIdleConns(b.o.concurrency)

	gen := &callbackGen{secret: b.secret, tag: "raw", runID: b.runID, payloadBytes: b.o.payloadBytes}
	fn := func(n int) (outcome, int64, error) {
		now := time.Now()
		body := gen.body(n, now)
		id := gen.eventID(n)
		sig, _ := signature.SignStandardWebhooks(gen.secret, id, now, body)
		// The headers the gateway keeps with a Standard Webhooks callback.
		headers, _ := json.Marshal(map[string]string{
			"Content-Type": "application/json", "User-Agent": "callgate-loadgen",
			"Webhook-Id": id, "Webhook-Signature": sig, "Webhook-Timestamp": strconv.FormatInt(now.Unix(), 10),
		})
		received := now.UTC().Truncate(time.Microsecond)
		trace := fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
		r, err := db.ExecContext(ctx, baselineSQL, b.source, b.kind, id, orderCode(n),
			body, headers, trace, received, received.Add(time.Minute))
		if err != nil {
			return outTransport, 0, err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return outDuplicate, 0, nil
		}
		return outAccepted, 0, nil
	}
	res := b.closedLoop(ctx, b.o.concurrency, b.baseProcs(), nil, fn)
	ph.Warmup, ph.Measured, ph.Total = b.windows(res.recs)
	ph.FirstErrors = res.errs
	ph.Resources = res.resources
	if err := ctx.Err(); err != nil {
		return ph, err
	}
	ph.Verify.Accepted = ph.Total.OK
	rows, err := b.countRows(ctx, gen.eventPrefix())
	if err != nil {
		return ph, err
	}
	ph.Verify.RowsInDB = rows
	ph.Verify.RowsMatch = rows == ph.Verify.Accepted
	b.logf("baseline: %.0f rows/s, p99 %.1f ms; %d rows for %d inserts", ph.Measured.OKPerSecond, ph.Measured.Latency.P99, rows, ph.Verify.Accepted)
	return ph, b.truncate(ctx)
}

// intakePhase: the gateway (group commit on or off), closed loop.
func (b *bench) intakePhase(ctx context.Context, name, tag string, group bool) (*ClosedPhase, error) {
	mode := "group_commit: false (one INSERT per request)"
	if group {
		mode = "group_commit: true (as shipped)"
	}
	ph := &ClosedPhase{Name: name, Concurrency: b.o.concurrency,
		What: fmt.Sprintf("gateway, %s; %d keep-alive clients, signed distinct paydemo callbacks; no worker", mode, b.o.concurrency)}
	if err := b.purge(b.queue()); err != nil && !isNotFound(err) {
		return ph, err
	}
	v := variant{groupCommit: group, announceBuffer: b.o.announceBuf}
	profile := group && b.o.cpuProfile != ""
	if profile {
		port, err := freePort()
		if err != nil {
			return ph, err
		}
		v.pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
	}
	gw, base, err := b.startGateway(ctx, name, v)
	if err != nil {
		return ph, err
	}
	profDone := make(chan error, 1)
	if profile {
		go func() { profDone <- b.cpuProfile(ctx, "http://"+v.pprofAddr) }()
	} else {
		profDone <- nil
	}
	defer gw.stop(15 * time.Second)
	b.logf("%s: gateway pid %d on %s, %d clients, warm-up %s, measuring %s", name, gw.pid(), base, b.o.concurrency, b.o.warmup, b.o.duration)

	gen := &callbackGen{url: base + "/callbacks/" + b.source, secret: b.secret, tag: tag, runID: b.runID, payloadBytes: b.o.payloadBytes}
	cl := &http.Client{Transport: newTransport(b.o.concurrency), Timeout: b.o.reqTimeout}
	defer cl.CloseIdleConnections()
	fn := func(n int) (outcome, int64, error) {
		req, err := gen.request(n)
		if err != nil {
			return outTransport, 0, err
		}
		return do(cl, req.WithContext(ctx))
	}
	procs := b.baseProcs()
	procs["gateway"] = gw.pid()
	res := b.closedLoop(ctx, b.o.concurrency, procs, map[string]bool{"gateway": true}, fn)
	ph.Warmup, ph.Measured, ph.Total = b.windows(res.recs)
	ph.FirstErrors = res.errs
	ph.Resources = res.resources
	if err := ctx.Err(); err != nil {
		return ph, err
	}
	b.logf("%s: %.0f accepted/s, p99 %.1f ms, %d errors; verifying", name, ph.Measured.OKPerSecond, ph.Measured.Latency.P99, ph.Total.Errors())

	if err := <-profDone; err != nil {
		b.logf("%s: no CPU profile: %v", name, err)
	} else if profile {
		ph.CPUProfile = b.o.cpuProfile
		b.logf("%s: gateway CPU profile of the measured window in %s (go tool pprof -top %s %s)", name, b.o.cpuProfile, filepath.Join(b.o.bin, "gateway"), b.o.cpuProfile)
	}

	// Every 200 is a row and its log id is announced, once the announcer
	// caught up.
	caughtUp := b.waitAnnouncer(ctx, 60*time.Second)
	vf := &ph.Verify
	vf.Accepted = ph.Total.OK
	if vf.RowsInDB, err = b.countRows(ctx, gen.eventPrefix()); err != nil {
		return ph, err
	}
	vf.RowsMatch = vf.RowsInDB == vf.Accepted
	if mt, err := scrape(base + "/metrics"); err == nil {
		vf.Announcements = map[string]float64{}
		for _, r := range []string{"published", "dropped", "nacked"} {
			vf.Announcements[r] = mt.sum("callgate_announcements_total", `result="`+r+`"`)
		}
	}
	if hwm, err := peakHWM(gw.pid()); err == nil {
		ph.GatewayRSSMB = hwm
	}
	// A graceful stop publishes whatever the announcer still holds: after
	// it the queue has everything this gateway will ever announce.
	gw.stop(15 * time.Second)
	ac, err := b.readAnnouncements(ctx, res.ids)
	if err != nil {
		return ph, err
	}
	ac.CaughtUpSeconds = -1
	if !caughtUp.IsZero() && !res.lastOK.IsZero() {
		ac.CaughtUpSeconds = round(max(caughtUp.Sub(res.lastOK).Seconds(), 0), 2)
	}
	vf.Announced = ac
	b.logf("%s: %d rows for %d accepted; %d messages announced %d distinct ids (missing %d, duplicated %d, unexpected %d), announcer caught up %.2fs after the last 200",
		name, vf.RowsInDB, vf.Accepted, ac.Messages, ac.DistinctIDs, ac.Missing, ac.Duplicated, ac.Unexpected, ac.CaughtUpSeconds)
	if err := b.purge(b.queue()); err != nil {
		return ph, err
	}
	return ph, b.truncate(ctx)
}

// cpuProfile saves the gateway's CPU profile over the measured window.
func (b *bench) cpuProfile(ctx context.Context, pprofBase string) error {
	sleepUntil(ctx, time.Now().Add(b.o.warmup))
	secs := max(int(b.o.duration.Seconds()), 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", pprofBase, secs), nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: b.o.duration + 30*time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	f, err := os.Create(b.o.cpuProfile)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// countRows counts the callbacks of one phase.
func (b *bench) countRows(ctx context.Context, eventPrefix string) (int, error) {
	var n int
	err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM callback_log WHERE source = ? AND event_id LIKE ?`,
		b.source, eventPrefix+"%").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting rows: %w", err)
	}
	return n, nil
}

// truncate empties the callback tables so that each phase starts on an
// empty table (and the worker of the open loop sees none of the earlier
// phases' PENDING rows); on the tables make bench-scale loaded, it
// removes the phases' rows only (clearLive).
func (b *bench) truncate(ctx context.Context) error {
	if b.scale != nil && b.scale.loaded {
		return b.clearLive(ctx)
	}
	for _, t := range []string{"callback_log", "callback_attempt", "outbox", "callback_key"} {
		if _, err := b.db.ExecContext(ctx, "TRUNCATE TABLE "+t); err != nil {
			return fmt.Errorf("truncating %s: %w", t, err)
		}
	}
	return nil
}
