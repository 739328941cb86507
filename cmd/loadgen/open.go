package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OpenLoop is the fixed-arrival-rate phase, worker running.
type OpenLoop struct {
	What     string  `json:"what"`
	Rate     float64 `json:"rate"`
	Arrivals string  `json:"arrivals"`
	// Worker: whether the worker ran (the backlog and end-to-end figures
	// exist only then).
	Worker bool `json:"worker"`
	// Scheduled: requests whose scheduled send time fell in the window.
	Scheduled int `json:"scheduled"`
	// Warmup and Measured group requests by scheduled send time; latency
	// runs from the scheduled time to the end of the answer, so a request
	// the generator or the client's connection pool held back pays for it
	// (no coordinated omission).
	Warmup   WindowStats `json:"warmup"`
	Measured WindowStats `json:"measured"`
	// ServiceLatency: the same requests from their actual send.
	ServiceLatency Latency `json:"service_latency"`
	// SendLag: how late the generator started requests (actual minus
	// scheduled); large values mean the load generator itself was starved.
	SendLag     Latency  `json:"send_lag"`
	FirstErrors []string `json:"first_errors,omitempty"`
	// PENDING rows in callback_log when the window opened and closed.
	PendingAtStart int  `json:"pending_at_window_start"`
	PendingAtEnd   int  `json:"pending_at_window_end"`
	BacklogGrew    bool `json:"backlog_grew"`
	// ProcessedPerSecond: SUCCESS callbacks per second in the window (the
	// worker's callgate_callbacks_processed_total).
	ProcessedPerSecond float64            `json:"processed_per_second"`
	Verify             Verify             `json:"verify"`
	Resources          Resources          `json:"resources"`
	GatewayRSSMB       float64            `json:"gateway_peak_rss_mb"`
	WorkerRSSMB        float64            `json:"worker_peak_rss_mb"`
	WorkerOutcomes     map[string]float64 `json:"worker_outcomes,omitempty"`
	// Series: one sample a second from the start of the phase to the end
	// of the drain.
	Series []Sample `json:"series"`
	// Slices: latency (from scheduled time) by 10 s of scheduled time,
	// warm-up included: does it degrade as the backlog grows?
	Slices []Slice `json:"slices"`
}

// Slice is the latency of the requests scheduled in [From, To) seconds.
type Slice struct {
	From    float64 `json:"from_s"`
	To      float64 `json:"to_s"`
	Latency Latency `json:"latency"`
}

// Sample is the state of the pipeline at one moment of the open loop.
type Sample struct {
	T         float64 `json:"t"`
	Accepted  int64   `json:"accepted"`
	Processed float64 `json:"processed"`
	Published float64 `json:"downstream_published"`
}

// EndToEnd is what the worker made of the open-loop load.
type EndToEnd struct {
	Accepted     int `json:"accepted"`
	Succeeded    int `json:"succeeded"`
	Failed       int `json:"failed"`
	StillPending int `json:"still_pending"`
	// ProcessedPerSecond over the measured window, and from the first to
	// the last SUCCESS.
	ProcessedPerSecondWindow  float64 `json:"processed_per_second_window"`
	ProcessedPerSecondOverall float64 `json:"processed_per_second_overall"`
	// DrainSeconds: from the last 200 to the last SUCCESS (processed_at).
	Drained      bool    `json:"drained"`
	DrainSeconds float64 `json:"drain_seconds"`
	// Lag: processed_at - received_at of callbacks received in the window
	// (LagWindow) and of all of them (LagAll).
	LagWindow Latency `json:"lag_window"`
	LagAll    Latency `json:"lag_all"`
	// Downstream: the worker's callgate_outbox_published_total per second
	// over the window, in total, and the outbox rows.
	DownstreamPerSecondWindow float64   `json:"downstream_published_per_second_window"`
	DownstreamPublished       float64   `json:"downstream_published_total"`
	OutboxRows                int       `json:"outbox_rows"`
	OutboxSent                int       `json:"outbox_sent"`
	DrainResources            Resources `json:"drain_resources"`
	// DrainProcessed: callbacks the worker finished during the drain.
	DrainProcessed int `json:"drain_processed"`
	// WorkerAnnounced: log ids the worker itself announced (compensation
	// job re-announcing PENDING callbacks older than its threshold, and
	// per-key wake-ups); CompensationRuns: runs of that job.
	WorkerAnnounced  float64 `json:"worker_announced"`
	CompensationRuns float64 `json:"compensation_runs"`
}

type openRec struct {
	sched, start, end time.Duration // since t0
	out               outcome
}

func (b *bench) openLoop(ctx context.Context) (*OpenLoop, *EndToEnd, error) {
	W, D := b.o.openWarmup, b.o.openDuration
	ol := &OpenLoop{Rate: b.o.rate, Arrivals: b.o.arrivals, Worker: b.o.openWorker,
		What: fmt.Sprintf("gateway as shipped (group commit, announce buffer as shipped) + worker; %s arrivals at %.0f/s, latency from scheduled send time", b.o.arrivals, b.o.rate)}
	e2e := &EndToEnd{}
	if err := b.purge(b.queue()); err != nil && !isNotFound(err) {
		return ol, e2e, err
	}
	var wk *child
	var wbase string
	if b.o.openWorker {
		var err error
		if wk, wbase, err = b.startWorker(ctx); err != nil {
			return ol, e2e, err
		}
		defer wk.stop(25 * time.Second)
	} else {
		ol.What = strings.Replace(ol.What, "+ worker", "WITHOUT the worker (-open-worker=false: the intake alone)", 1)
		e2e = nil
	}
	gw, base, err := b.startGateway(ctx, "open-loop", variant{groupCommit: true})
	if err != nil {
		return ol, e2e, err
	}
	defer gw.stop(15 * time.Second)
	b.logf("open loop: worker pid %d, gateway pid %d; %.0f req/s %s for %s warm-up + %s", wk.pidOr0(), gw.pid(), b.o.rate, b.o.arrivals, W, D)

	gen := &callbackGen{url: base + "/callbacks/" + b.source, secret: b.secret, tag: "ol", runID: b.runID, payloadBytes: b.o.payloadBytes, orders: b.orders}
	cl := &http.Client{Transport: newTransport(b.o.openMaxConns), Timeout: b.o.reqTimeout}
	defer cl.CloseIdleConnections()

	n := int(b.o.rate * (W + D).Seconds())
	offsets := make([]time.Duration, n)
	rng := rand.New(rand.NewPCG(1, 2))
	var t float64
	for i := range offsets {
		if b.o.arrivals == "poisson" {
			t += rng.ExpFloat64() / b.o.rate
			offsets[i] = time.Duration(t * 1e9)
		} else {
			offsets[i] = time.Duration(float64(i) * 1e9 / b.o.rate)
		}
	}
	recs := make([]openRec, n)
	var (
		wg       sync.WaitGroup
		accepted atomic.Int64
		lastOK   atomic.Int64
		errMu    sync.Mutex
		errs     []string
	)

	procs := b.baseProcs()
	procs["gateway"], procs["worker"] = gw.pid(), wk.pidOr0()
	hwm := map[string]bool{"gateway": true, "worker": true}
	workerMetrics := func() (processed, published float64) {
		if wk == nil {
			return -1, -1
		}
		mt, err := scrape(wbase + "/metrics")
		if err != nil {
			return -1, -1
		}
		return mt.sum("callgate_callbacks_processed_total", `outcome="success"`), mt.sum("callgate_outbox_published_total")
	}

	t0 := time.Now().Add(100 * time.Millisecond)
	stopSeries := make(chan struct{})
	seriesDone := make(chan struct{})
	go func() { // one sample a second
		defer close(seriesDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopSeries:
				return
			case <-tick.C:
				p, pub := workerMetrics()
				ol.Series = append(ol.Series, Sample{T: round(time.Since(t0).Seconds(), 1), Accepted: accepted.Load(), Processed: p, Published: pub})
			}
		}
	}()
	// The measured window: PENDING rows, worker counters and CPU at both ends.
	type edge struct {
		pending              int
		processed, published float64
	}
	var winStart, winEnd edge
	var res Resources
	windowDone := make(chan struct{})
	go func() {
		defer close(windowDone)
		sleepUntil(ctx, t0.Add(W))
		m := startMeter(procs, hwm, b.dbStatus, b.foreignQueries)
		winStart.pending = b.pending(ctx)
		winStart.processed, winStart.published = workerMetrics()
		sleepUntil(ctx, t0.Add(W+D))
		winEnd.pending = b.pending(ctx)
		winEnd.processed, winEnd.published = workerMetrics()
		res = m.finish()
	}()

	// Dispatch: each request at its scheduled time, on its own goroutine;
	// overdue ones go out at once and keep their scheduled time.
	for i := 0; i < n && ctx.Err() == nil; {
		now := time.Since(t0)
		if offsets[i] > now {
			time.Sleep(offsets[i] - now)
			continue
		}
		for ; i < n && offsets[i] <= now; i++ {
			k := i // i is the dispatcher's, shared across iterations
			wg.Go(func() {
				r := &recs[k]
				r.sched = offsets[k]
				r.start = time.Since(t0)
				req, err := gen.request(k)
				if err == nil {
					r.out, _, err = do(cl, req.WithContext(ctx))
				} else {
					r.out = outTransport
				}
				r.end = time.Since(t0)
				if r.out == outAccepted {
					accepted.Add(1)
					ns := t0.Add(r.end).UnixNano()
					for {
						prev := lastOK.Load()
						if ns <= prev || lastOK.CompareAndSwap(prev, ns) {
							break
						}
					}
				}
				if err != nil {
					errMu.Lock()
					if len(errs) < 5 {
						errs = append(errs, err.Error())
					}
					errMu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	<-windowDone
	ol.Resources = res
	ol.FirstErrors = errs
	if err := ctx.Err(); err != nil {
		close(stopSeries)
		<-seriesDone
		return ol, e2e, err
	}

	// Figures by scheduled time.
	var lw, lm, ls, lag []time.Duration
	add := func(s *WindowStats, lats *[]time.Duration, r openRec) {
		s.count(r.out)
		*lats = append(*lats, r.end-r.sched)
	}
	total := 0
	for _, r := range recs {
		if r.end == 0 { // never sent (interrupted)
			continue
		}
		if r.out == outAccepted {
			total++
		}
		if r.sched < W {
			add(&ol.Warmup, &lw, r)
			continue
		}
		add(&ol.Measured, &lm, r)
		ls = append(ls, r.end-r.start)
		lag = append(lag, r.start-r.sched)
	}
	ol.Scheduled = len(lm)
	const slice = 10 * time.Second
	bySlice := map[int][]time.Duration{}
	for _, r := range recs {
		if r.end != 0 {
			k := int(r.sched / slice)
			bySlice[k] = append(bySlice[k], r.end-r.sched)
		}
	}
	for k := 0; k <= int((W+D)/slice); k++ {
		if ds := bySlice[k]; len(ds) > 0 {
			ol.Slices = append(ol.Slices, Slice{From: float64(k) * slice.Seconds(), To: float64(k+1) * slice.Seconds(), Latency: summarize(ds)})
		}
	}
	ol.Warmup.Seconds, ol.Measured.Seconds = W.Seconds(), D.Seconds()
	ol.Warmup.Latency, ol.Measured.Latency = summarize(lw), summarize(lm)
	if W > 0 {
		ol.Warmup.OKPerSecond = round(float64(ol.Warmup.OK)/W.Seconds(), 1)
	}
	ol.Measured.OKPerSecond = round(float64(ol.Measured.OK)/D.Seconds(), 1)
	ol.ServiceLatency, ol.SendLag = summarize(ls), summarize(lag)
	ol.PendingAtStart, ol.PendingAtEnd = winStart.pending, winEnd.pending
	// Grew: by more than one second of arrivals over the window.
	ol.BacklogGrew = ol.PendingAtEnd-ol.PendingAtStart > int(b.o.rate)
	if winStart.processed >= 0 && winEnd.processed >= 0 {
		ol.ProcessedPerSecond = round((winEnd.processed-winStart.processed)/D.Seconds(), 1)
		e2e.ProcessedPerSecondWindow = ol.ProcessedPerSecond
		e2e.DownstreamPerSecondWindow = round((winEnd.published-winStart.published)/D.Seconds(), 1)
	}
	b.logf("open loop: %.0f accepted/s, p99 %.1f ms (from scheduled time), %d errors; PENDING %d -> %d; worker %.0f/s",
		ol.Measured.OKPerSecond, ol.Measured.Latency.P99, ol.Measured.Errors(), ol.PendingAtStart, ol.PendingAtEnd, ol.ProcessedPerSecond)

	if wk == nil {
		close(stopSeries)
		<-seriesDone
		if mt, err := scrape(base + "/metrics"); err == nil {
			ol.Verify.Announcements = map[string]float64{}
			for _, r := range []string{"published", "dropped", "nacked"} {
				ol.Verify.Announcements[r] = mt.sum("callgate_announcements_total", `result="`+r+`"`)
			}
		}
		if h, err := peakHWM(gw.pid()); err == nil {
			ol.GatewayRSSMB = h
		}
		gw.stop(15 * time.Second)
		ol.Verify.Accepted = total
		var err error
		if ol.Verify.RowsInDB, err = b.countRows(ctx, gen.eventPrefix()); err != nil {
			return ol, nil, err
		}
		ol.Verify.RowsMatch = ol.Verify.RowsInDB == ol.Verify.Accepted
		return ol, nil, nil
	}

	// End to end: wait for the worker to finish the backlog.
	last200 := time.Unix(0, lastOK.Load())
	drainMeter := startMeter(procs, hwm, b.dbStatus, b.foreignQueries)
	drainFrom, _ := workerMetrics()
	deadline := last200.Add(b.o.drainTimeout)
	left := -1
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if left = b.pending(ctx); left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	e2e.DrainResources = drainMeter.finish()
	if drainTo, _ := workerMetrics(); drainFrom >= 0 && drainTo >= 0 {
		e2e.DrainProcessed = int(drainTo - drainFrom)
	}
	close(stopSeries)
	<-seriesDone
	if left != 0 {
		b.logf("end to end: %d callbacks still PENDING %s after the last 200", b.pending(ctx), b.o.drainTimeout)
	}

	// The processes' own figures, then stop them (the worker finishes what
	// it has in hand), so that the database is read at rest.
	if mt, err := scrape(base + "/metrics"); err == nil {
		ol.Verify.Announcements = map[string]float64{}
		for _, r := range []string{"published", "dropped", "nacked"} {
			ol.Verify.Announcements[r] = mt.sum("callgate_announcements_total", `result="`+r+`"`)
		}
	}
	if mt, err := scrape(wbase + "/metrics"); err == nil {
		ol.WorkerOutcomes = map[string]float64{}
		for _, o := range []string{"success", "retry", "failed", "deferred", "skipped"} {
			ol.WorkerOutcomes[o] = mt.sum("callgate_callbacks_processed_total", `outcome="`+o+`"`)
		}
		e2e.DownstreamPublished = mt.sum("callgate_outbox_published_total")
		// The worker's own announcements: compensation re-announcements
		// and per-key wake-ups.
		e2e.WorkerAnnounced = mt.sum("callgate_announcements_total", `result="published"`)
		e2e.CompensationRuns = mt.sum("callgate_scheduler_job_runs_total", `job="compensation"`)
	}
	if h, err := peakHWM(gw.pid()); err == nil {
		ol.GatewayRSSMB = h
	}
	if h, err := peakHWM(wk.pid()); err == nil {
		ol.WorkerRSSMB = h
	}
	wk.stop(25 * time.Second)
	gw.stop(15 * time.Second)

	// Verify and measure from the database.
	e2e.Accepted = total
	v := &ol.Verify
	v.Accepted = total
	if v.RowsInDB, err = b.countRows(ctx, gen.eventPrefix()); err != nil {
		return ol, e2e, err
	}
	v.RowsMatch = v.RowsInDB == v.Accepted
	if err := b.e2eFromDB(ctx, e2e, last200, t0.Add(W), t0.Add(W+D)); err != nil {
		return ol, e2e, err
	}
	b.logf("end to end: %d/%d SUCCESS, last SUCCESS %.2fs after the last 200, lag p99 %.0f ms",
		e2e.Succeeded, e2e.Accepted, e2e.DrainSeconds, e2e.LagWindow.P99)
	return ol, e2e, nil
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

// pending counts PENDING callbacks (-1 on error).
func (b *bench) pending(ctx context.Context) int {
	var n int
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM callback_log WHERE status = 'PENDING'`).Scan(&n); err != nil {
		return -1
	}
	return n
}

func (b *bench) e2eFromDB(ctx context.Context, e *EndToEnd, last200, winStart, winEnd time.Time) error {
	byStatus, err := b.countByStatus(ctx, "callback_log")
	if err != nil {
		return err
	}
	e.Succeeded, e.Failed, e.StillPending = byStatus["SUCCESS"], byStatus["FAILED"], byStatus["PENDING"]
	e.Drained = e.StillPending == 0 && e.Failed == 0 && e.Succeeded == e.Accepted

	var first, last *time.Time
	if err := b.db.QueryRowContext(ctx, `SELECT MIN(processed_at), MAX(processed_at) FROM callback_log WHERE status = 'SUCCESS'`).Scan(&first, &last); err != nil {
		return err
	}
	if first != nil && last != nil {
		e.DrainSeconds = round(last.Sub(last200).Seconds(), 2)
		if span := last.Sub(*first).Seconds(); span > 0 {
			e.ProcessedPerSecondOverall = round(float64(e.Succeeded)/span, 1)
		}
	}

	lagW, lagA, err := b.lags(ctx, winStart, winEnd)
	if err != nil {
		return err
	}
	e.LagWindow, e.LagAll = summarize(lagW), summarize(lagA)

	outbox, err := b.countByStatus(ctx, "outbox")
	if err != nil {
		return err
	}
	for _, c := range outbox {
		e.OutboxRows += c
	}
	e.OutboxSent = outbox["SENT"]
	return nil
}

// countByStatus counts the rows of a table by status.
func (b *bench) countByStatus(ctx context.Context, table string) (map[string]int, error) {
	rows, err := b.db.QueryContext(ctx, "SELECT status, COUNT(*) FROM "+table+" GROUP BY status")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var c int
		if err := rows.Scan(&s, &c); err != nil {
			return nil, err
		}
		out[s] = c
	}
	return out, rows.Err()
}

// lags returns processed_at - received_at of the SUCCESS callbacks received
// in [winStart, winEnd), and of all of them.
func (b *bench) lags(ctx context.Context, winStart, winEnd time.Time) (window, all []time.Duration, err error) {
	rows, err := b.db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, received_at, processed_at), received_at FROM callback_log WHERE status = 'SUCCESS'`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var us int64
		var recv time.Time
		if err := rows.Scan(&us, &recv); err != nil {
			return nil, nil, err
		}
		d := time.Duration(us) * time.Microsecond
		all = append(all, d)
		if !recv.Before(winStart) && recv.Before(winEnd) {
			window = append(window, d)
		}
	}
	return window, all, rows.Err()
}
