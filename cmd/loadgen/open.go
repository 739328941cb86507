package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OpenLoop is a fixed-arrival-rate run: the open phase, or one step of the
// sweep.
type OpenLoop struct {
	What     string  `json:"what"`
	Rate     float64 `json:"rate"`
	Arrivals string  `json:"arrivals"`
	// RateRatio: Rate over the baseline's rows/s (the offered load);
	// ProcessedRatio: ProcessedPerSecond over it.
	RateRatio      float64 `json:"rate_ratio_to_baseline,omitempty"`
	ProcessedRatio float64 `json:"processed_ratio_to_baseline,omitempty"`
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
	ProcessedPerSecond float64 `json:"processed_per_second"`
	// CPUPerProcessed: each process's CPU in the window per callback the
	// worker processed in it, in ms ("machine": all of the machine's).
	CPUPerProcessed map[string]float64 `json:"cpu_ms_per_processed_callback,omitempty"`
	Verify          Verify             `json:"verify"`
	Resources       Resources          `json:"resources"`
	GatewayRSSMB    float64            `json:"gateway_peak_rss_mb"`
	WorkerRSSMB     float64            `json:"worker_peak_rss_mb"`
	WorkerOutcomes  map[string]float64 `json:"worker_outcomes,omitempty"`
	// Series: one sample a second from the start of the phase to the end
	// of the drain (open phase only).
	Series []Sample `json:"series,omitempty"`
	// Slices: latency (from scheduled time) by 10 s of scheduled time,
	// warm-up included: does it degrade as the backlog grows?
	Slices []Slice `json:"slices"`
	// Spans: latency of the requests in flight during each span
	// openSpec.during returned (make bench-scale's retention).
	Spans []SpanStats `json:"spans,omitempty"`
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

// openSpec is one open-loop run: the open phase, or one step of the sweep.
type openSpec struct {
	name     string // names its configs and logs
	tag      string // event-id prefix
	rate     float64
	warmup   time.Duration
	duration time.Duration
	worker   bool
	// drainWait: after the last send, the longest to wait for the worker
	// to have processed every callback.
	drainWait time.Duration
	// meterDrain meters the processes while waiting; series samples the
	// pipeline once a second.
	meterDrain, series bool
	// during, when set, runs beside the load from the end of the warm-up
	// on, and the load lasts until it returns (duration is then the
	// longest it may last); the spans it returns get latency figures of
	// their own (OpenLoop.Spans).
	during func(ctx context.Context, t0 time.Time) ([]Span, error)
}

// openLoop is the open phase: -rate, or -open-ratio x the baseline.
func (b *bench) openLoop(ctx context.Context) (*OpenLoop, *EndToEnd, error) {
	rate := b.o.rate
	if rate == 0 {
		rate = round(b.o.openRatio*b.baselineRate, 0)
	}
	if rate <= 0 {
		return nil, nil, errors.New("open loop: no rate (the baseline measured nothing; pass -rate)")
	}
	return b.openRun(ctx, openSpec{name: "open-loop", tag: "ol", rate: rate, warmup: b.o.openWarmup, duration: b.o.openDuration,
		worker: b.o.openWorker, drainWait: b.o.drainTimeout, meterDrain: true, series: true})
}

type openRec struct {
	sched, start, end time.Duration // since t0
	out               outcome
}

// openRun sends signed callbacks at spec.rate, each at its scheduled time,
// to a fresh gateway (and worker), then waits for the worker to finish,
// verifies and measures from the database, and leaves the tables and the
// payment queue empty.
func (b *bench) openRun(ctx context.Context, spec openSpec) (*OpenLoop, *EndToEnd, error) {
	W, D := spec.warmup, spec.duration
	ol := &OpenLoop{Rate: spec.rate, Arrivals: b.o.arrivals, Worker: spec.worker, RateRatio: ratio(spec.rate, b.baselineRate),
		What: fmt.Sprintf("gateway as shipped (group commit, announce buffer as shipped) + worker (batch size %d); %s arrivals at %.0f/s, latency from scheduled send time", b.batchSize, b.o.arrivals, spec.rate)}
	e2e := &EndToEnd{}
	if !spec.worker {
		ol.What = strings.Replace(ol.What, fmt.Sprintf("+ worker (batch size %d)", b.batchSize), "WITHOUT the worker (-open-worker=false: the intake alone)", 1)
		e2e = nil
	}
	if err := b.purge(b.queue()); err != nil && !isNotFound(err) {
		return ol, e2e, err
	}
	n := int(spec.rate * (W + D).Seconds())
	if err := b.freshOrders(ctx, n); err != nil {
		return ol, e2e, err
	}
	var wk *child
	var wbase string
	if spec.worker {
		var err error
		if wk, wbase, err = b.startWorker(ctx, spec.name+"-worker", variant{}); err != nil {
			return ol, e2e, err
		}
		defer wk.stop(25 * time.Second)
	}
	gw, base, err := b.startGateway(ctx, spec.name, variant{groupCommit: true})
	if err != nil {
		return ol, e2e, err
	}
	defer gw.stop(15 * time.Second)
	b.logf("%s: worker pid %d, gateway pid %d; %.0f req/s %s for %s warm-up + %s", spec.name, wk.pidOr0(), gw.pid(), spec.rate, b.o.arrivals, W, D)

	gen := &callbackGen{url: base + "/callbacks/" + b.source, secret: b.secret, tag: spec.tag, runID: b.runID, payloadBytes: b.o.payloadBytes, orders: n}
	cl := &http.Client{Transport: newTransport(b.o.openMaxConns), Timeout: b.o.reqTimeout}
	defer cl.CloseIdleConnections()

	offsets := make([]time.Duration, n)
	rng := rand.New(rand.NewPCG(1, 2))
	var t float64
	for i := range offsets {
		if b.o.arrivals == "poisson" {
			t += rng.ExpFloat64() / spec.rate
			offsets[i] = time.Duration(t * 1e9)
		} else {
			offsets[i] = time.Duration(float64(i) * 1e9 / spec.rate)
		}
	}
	recs := make([]openRec, n)
	var (
		wg       sync.WaitGroup
		accepted atomic.Int64
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
		if !spec.series {
			return
		}
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
	endSeries := func() {
		close(stopSeries)
		<-seriesDone
	}
	// The measured window: PENDING rows, worker counters and CPU at both ends.
	type edge struct {
		pending              int
		processed, published float64
	}
	var winStart, winEnd edge
	var res Resources
	// With spec.during the load (and the window) ends when it returns:
	// stopAt is then its time since t0, and loadEnd is closed.
	var (
		stopAt    atomic.Int64
		spans     []Span
		duringErr error
	)
	loadEnd := make(chan struct{})
	if spec.during != nil {
		go func() {
			defer close(loadEnd)
			sleepUntil(ctx, t0.Add(W))
			spans, duringErr = spec.during(ctx, t0)
			stopAt.Store(int64(time.Since(t0)))
		}()
	}
	windowDone := make(chan struct{})
	go func() {
		defer close(windowDone)
		sleepUntil(ctx, t0.Add(W))
		m := startMeter(procs, hwm, b.dbStatus, b.foreignQueries)
		winStart.pending = b.pending(ctx)
		winStart.processed, winStart.published = workerMetrics()
		select { // loadEnd is never closed without spec.during
		case <-ctx.Done():
		case <-time.After(time.Until(t0.Add(W + D))):
		case <-loadEnd:
		}
		winEnd.pending = b.pending(ctx)
		winEnd.processed, winEnd.published = workerMetrics()
		res = m.finish()
	}()

	// Dispatch: each request at its scheduled time, on its own goroutine;
	// overdue ones go out at once and keep their scheduled time.
	for i := 0; i < n && ctx.Err() == nil; {
		if stop := time.Duration(stopAt.Load()); stop > 0 && offsets[i] >= stop {
			break
		}
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
	if spec.during != nil {
		<-loadEnd // it may outlast the longest load
		if stop := time.Duration(stopAt.Load()); stop > W && stop-W < D {
			D = stop - W
		}
	}
	ol.Resources = res
	ol.FirstErrors = errs
	if err := ctx.Err(); err != nil {
		endSeries()
		return ol, e2e, err
	}
	total, lastSend := ol.summarize(recs, W, D)
	ol.Spans = spanStats(recs, spans)
	if duringErr != nil {
		endSeries()
		return ol, e2e, duringErr
	}
	ol.PendingAtStart, ol.PendingAtEnd = winStart.pending, winEnd.pending
	// Grew: by more than one second of arrivals over the window.
	ol.BacklogGrew = ol.PendingAtEnd-ol.PendingAtStart > int(spec.rate)
	var processedInWindow float64
	if winStart.processed >= 0 && winEnd.processed >= 0 {
		processedInWindow = winEnd.processed - winStart.processed
		ol.ProcessedPerSecond = round(processedInWindow/D.Seconds(), 1)
		ol.ProcessedRatio = ratio(ol.ProcessedPerSecond, b.baselineRate)
		ol.CPUPerProcessed = cpuPerCallback(res, processedInWindow)
		e2e.ProcessedPerSecondWindow = ol.ProcessedPerSecond
		e2e.DownstreamPerSecondWindow = round((winEnd.published-winStart.published)/D.Seconds(), 1)
	}
	b.logf("%s: %.0f accepted/s, p99 %.1f ms (from scheduled time), %d errors; PENDING %d -> %d; worker %.0f/s",
		spec.name, ol.Measured.OKPerSecond, ol.Measured.Latency.P99, ol.Measured.Errors(), ol.PendingAtStart, ol.PendingAtEnd, ol.ProcessedPerSecond)

	// End to end: wait for the worker to finish.
	if wk != nil {
		var drainMeter *meter
		var drainFrom float64
		if spec.meterDrain {
			drainMeter = startMeter(procs, hwm, b.dbStatus, b.foreignQueries)
			drainFrom, _ = workerMetrics()
		}
		left := b.waitPending(ctx, t0.Add(lastSend).Add(spec.drainWait))
		if drainMeter != nil {
			e2e.DrainResources = drainMeter.finish()
			if drainTo, _ := workerMetrics(); drainFrom >= 0 && drainTo >= 0 {
				e2e.DrainProcessed = int(drainTo - drainFrom)
			}
		}
		if left != 0 {
			b.logf("%s: %d callbacks still PENDING %s after the last send", spec.name, left, spec.drainWait)
		}
	}
	endSeries()

	// The processes' own figures, then stop them (the worker finishes what
	// it has in hand), so that the database is read at rest.
	if mt, err := scrape(base + "/metrics"); err == nil {
		ol.Verify.Announcements = map[string]float64{}
		for _, r := range []string{"published", "dropped", "nacked"} {
			ol.Verify.Announcements[r] = mt.sum("callgate_announcements_total", `result="`+r+`"`)
		}
	}
	if wk != nil {
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
		if h, err := peakHWM(wk.pid()); err == nil {
			ol.WorkerRSSMB = h
		}
	}
	if h, err := peakHWM(gw.pid()); err == nil {
		ol.GatewayRSSMB = h
	}
	wk.stop(25 * time.Second)
	gw.stop(15 * time.Second)

	// Verify and measure from the database.
	v := &ol.Verify
	v.Accepted = total
	if v.RowsInDB, err = b.countRows(ctx, gen.eventPrefix()); err != nil {
		return ol, e2e, err
	}
	v.RowsMatch = v.RowsInDB == v.Accepted
	if wk != nil {
		e2e.Accepted = total
		if err := b.e2eFromDB(ctx, e2e, t0.Add(lastSend), t0.Add(W), t0.Add(W+D)); err != nil {
			return ol, e2e, err
		}
		if e2e.Unrouted, err = b.takeUnrouted(); err != nil {
			return ol, e2e, err
		}
		b.logf("%s: %d/%d SUCCESS, last SUCCESS %.2fs after the last send, lag p99 %.0f ms",
			spec.name, e2e.Succeeded, e2e.Accepted, e2e.DrainSeconds, e2e.LagWindow.P99)
	}
	if err := b.purge(b.queue()); err != nil {
		return ol, e2e, err
	}
	return ol, e2e, b.truncate(ctx)
}

// summarize fills the latency figures from the records, by scheduled time,
// and returns the number of 200s and when the last request was sent
// (since t0).
func (ol *OpenLoop) summarize(recs []openRec, W, D time.Duration) (accepted int, lastSend time.Duration) {
	var lw, lm, ls, lag []time.Duration
	add := func(s *WindowStats, lats *[]time.Duration, r openRec) {
		s.count(r.out)
		*lats = append(*lats, r.end-r.sched)
	}
	const slice = 10 * time.Second
	bySlice := map[int][]time.Duration{}
	for _, r := range recs {
		if r.end == 0 { // never sent (interrupted)
			continue
		}
		lastSend = max(lastSend, r.start)
		if r.out == outAccepted {
			accepted++
		}
		k := int(r.sched / slice)
		bySlice[k] = append(bySlice[k], r.end-r.sched)
		if r.sched < W {
			add(&ol.Warmup, &lw, r)
			continue
		}
		add(&ol.Measured, &lm, r)
		ls = append(ls, r.end-r.start)
		lag = append(lag, r.start-r.sched)
	}
	ol.Scheduled = len(lm)
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
	return accepted, lastSend
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}
