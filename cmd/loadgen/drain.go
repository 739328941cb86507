package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Drain is the worker alone working off a backlog the intake prepared:
// what the worker can do when nothing else runs, per batch size.
type Drain struct {
	What      string `json:"what"`
	BatchSize int    `json:"batch_size"`
	// Backlog: callbacks accepted (PENDING, announced) by the group-commit
	// gateway in a closed loop without a worker, in FillSeconds; the
	// gateway is stopped before the worker starts.
	Backlog     int      `json:"backlog"`
	FillSeconds float64  `json:"fill_seconds"`
	FillErrors  int      `json:"fill_errors"`
	FirstErrors []string `json:"first_errors,omitempty"`
	// The measured window runs from the worker being ready (metrics
	// answer, payment consumer attached) until its counters say the whole
	// backlog is processed (or -drain-max passed). Processed: SUCCESS in
	// the window.
	Seconds         float64 `json:"seconds"`
	Processed       int     `json:"processed"`
	PerSecond       float64 `json:"per_second"`
	RatioToBaseline float64 `json:"ratio_to_baseline,omitempty"`
	// PerSecondFirstToLast: SUCCESS per second between the first and the
	// last processed_at (the database's view, start-up excluded).
	PerSecondFirstToLast float64 `json:"per_second_first_to_last"`
	// Drained: every callback of the backlog SUCCESS afterwards.
	Drained   bool `json:"drained"`
	Succeeded int  `json:"succeeded"`
	Failed    int  `json:"failed"`
	Pending   int  `json:"pending"`
	// CPUPerCallback: each process's CPU in the window per processed
	// callback, in ms ("machine": all of the machine's).
	CPUPerCallback map[string]float64 `json:"cpu_ms_per_callback,omitempty"`
	// MariaDB's global counters per processed callback: statements
	// (Questions), commits (Com_commit), fsyncs.
	StatementsPerCallback float64 `json:"statements_per_callback"`
	CommitsPerCallback    float64 `json:"commits_per_callback"`
	FsyncsPerCallback     float64 `json:"fsyncs_per_callback"`
	OutboxRows            int     `json:"outbox_rows"`
	OutboxSent            int     `json:"outbox_sent"`
	// Unrouted: notifications in <prefix>.downstream.unrouted afterwards.
	Unrouted       int                `json:"unrouted_notifications"`
	WorkerRSSMB    float64            `json:"worker_peak_rss_mb"`
	WorkerOutcomes map[string]float64 `json:"worker_outcomes,omitempty"`
	// Verify: the fill's 200s against its rows.
	Verify    Verify    `json:"verify"`
	Resources Resources `json:"resources"`
}

// drain prepares a backlog and measures the worker, with worker.batch_size
// size, working it off alone.
func (b *bench) drain(ctx context.Context, size int) (*Drain, error) {
	backlog := b.o.drainBacklog
	if size == 1 {
		backlog = b.o.drain1Backlog
	}
	name := fmt.Sprintf("drain-bs%d", size)
	d := &Drain{BatchSize: size,
		What: fmt.Sprintf("worker alone (worker.batch_size %d), no intake running, on a backlog of %d PENDING payment callbacks (each paying its own order) accepted and announced by the group-commit gateway beforehand", size, backlog)}
	if err := b.purge(b.queue()); err != nil && !isNotFound(err) {
		return d, err
	}
	if err := b.freshOrders(ctx, backlog); err != nil {
		return d, err
	}
	if err := b.fillBacklog(ctx, d, name, backlog); err != nil {
		return d, err
	}

	wk, wbase, err := b.startWorker(ctx, name+"-worker", variant{batchSize: size})
	if err != nil {
		return d, err
	}
	defer wk.stop(25 * time.Second)
	outcomes := func() map[string]float64 {
		mt, err := scrape(wbase + "/metrics")
		if err != nil {
			return nil
		}
		out := map[string]float64{}
		for _, o := range []string{"success", "retry", "failed", "deferred", "skipped"} {
			out[o] = mt.sum("callgate_callbacks_processed_total", `outcome="`+o+`"`)
		}
		return out
	}
	procs := b.baseProcs()
	procs["worker"] = wk.pid()
	b.logf("%s: worker pid %d, batch size %d, draining %d callbacks", name, wk.pid(), size, d.Backlog)
	m := startMeter(procs, map[string]bool{"worker": true}, b.dbStatus, b.foreignQueries)
	from := outcomes()["success"]
	// The worker's counters end the window (cheap to read); MariaDB's
	// PENDING count, now and then, is the safety net.
	deadline := time.Now().Add(b.o.drainMax)
	lastDB := time.Now()
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if o := outcomes(); o != nil && o["success"]+o["failed"] >= float64(d.Backlog) {
			break
		}
		if time.Since(lastDB) >= 2*time.Second {
			if b.pending(ctx) == 0 {
				break
			}
			lastDB = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.Resources = m.finish()
	if err := ctx.Err(); err != nil {
		return d, err
	}
	d.WorkerOutcomes = outcomes()
	d.Processed = int(d.WorkerOutcomes["success"] - from)
	d.Seconds = d.Resources.WindowSeconds
	if d.Seconds > 0 {
		d.PerSecond = round(float64(d.Processed)/d.Seconds, 1)
	}
	d.RatioToBaseline = ratio(d.PerSecond, b.baselineRate)
	d.CPUPerCallback = cpuPerCallback(d.Resources, float64(d.Processed))
	if st := d.Resources.MariaDB; st != nil && d.Processed > 0 {
		n := float64(d.Processed)
		d.StatementsPerCallback = round(st["Questions"]/n, 2)
		d.CommitsPerCallback = round(st["Com_commit"]/n, 3)
		d.FsyncsPerCallback = round(st["Innodb_data_fsyncs"]/n, 3)
	}
	if h, err := peakHWM(wk.pid()); err == nil {
		d.WorkerRSSMB = h
	}
	wk.stop(25 * time.Second)

	// The database at rest.
	byStatus, err := b.countByStatus(ctx, "callback_log")
	if err != nil {
		return d, err
	}
	d.Succeeded, d.Failed, d.Pending = byStatus["SUCCESS"], byStatus["FAILED"], byStatus["PENDING"]
	d.Drained = d.Succeeded == d.Backlog && d.Failed == 0 && d.Pending == 0
	var first, last *time.Time
	if err := b.db.QueryRowContext(ctx, `SELECT MIN(processed_at), MAX(processed_at) FROM callback_log WHERE status = 'SUCCESS' AND id > ?`,
		b.floor("callback_log")).Scan(&first, &last); err != nil {
		return d, err
	}
	if first != nil && last != nil {
		if span := last.Sub(*first).Seconds(); span > 0 {
			d.PerSecondFirstToLast = round(float64(d.Succeeded)/span, 1)
		}
	}
	outbox, err := b.countByStatus(ctx, "outbox")
	if err != nil {
		return d, err
	}
	for _, c := range outbox {
		d.OutboxRows += c
	}
	d.OutboxSent = outbox["SENT"]
	if d.Unrouted, err = b.takeUnrouted(); err != nil {
		return d, err
	}
	b.logf("%s: %d processed in %.1fs = %.0f/s (%s the baseline); CPU per callback worker %.3f ms, mariadbd %.3f ms; %.1f statements, %.2f commits per callback",
		name, d.Processed, d.Seconds, d.PerSecond, xbase(d.RatioToBaseline), d.CPUPerCallback["worker"], d.CPUPerCallback["mariadbd"], d.StatementsPerCallback, d.CommitsPerCallback)
	if err := b.purge(b.queue()); err != nil {
		return d, err
	}
	return d, b.truncate(ctx)
}

// fillBacklog has the group-commit gateway accept n callbacks (closed loop,
// no worker), waits until their announcements are queued, and stops it.
func (b *bench) fillBacklog(ctx context.Context, d *Drain, name string, n int) error {
	gw, base, err := b.startGateway(ctx, name+"-fill", variant{groupCommit: true, announceBuffer: b.o.announceBuf})
	if err != nil {
		return err
	}
	defer gw.stop(15 * time.Second)
	gen := &callbackGen{url: base + "/callbacks/" + b.source, secret: b.secret, tag: fmt.Sprintf("d%d", d.BatchSize), runID: b.runID,
		payloadBytes: b.o.payloadBytes, orders: n}
	cl := &http.Client{Transport: newTransport(b.o.concurrency), Timeout: b.o.reqTimeout}
	defer cl.CloseIdleConnections()
	var (
		seq, accepted, failed atomic.Int64
		wg                    sync.WaitGroup
		mu                    sync.Mutex
	)
	t := time.Now()
	for range b.o.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(seq.Add(1) - 1)
				if k >= n {
					return
				}
				req, err := gen.request(k)
				out := outTransport
				if err == nil {
					out, _, err = do(cl, req.WithContext(ctx))
				}
				if out == outAccepted {
					accepted.Add(1)
					continue
				}
				failed.Add(1)
				mu.Lock()
				if err != nil && len(d.FirstErrors) < 5 {
					d.FirstErrors = append(d.FirstErrors, err.Error())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	d.FillSeconds = round(time.Since(t).Seconds(), 2)
	d.Backlog, d.FillErrors = int(accepted.Load()), int(failed.Load())
	if err := ctx.Err(); err != nil {
		return err
	}
	b.waitAnnouncer(ctx, 60*time.Second)
	if mt, err := scrape(base + "/metrics"); err == nil {
		d.Verify.Announcements = map[string]float64{}
		for _, r := range []string{"published", "dropped", "nacked"} {
			d.Verify.Announcements[r] = mt.sum("callgate_announcements_total", `result="`+r+`"`)
		}
	}
	gw.stop(15 * time.Second) // graceful: the announcer publishes what it holds
	d.Verify.Accepted = d.Backlog
	if d.Verify.RowsInDB, err = b.countRows(ctx, gen.eventPrefix()); err != nil {
		return err
	}
	d.Verify.RowsMatch = d.Verify.RowsInDB == d.Verify.Accepted
	b.logf("%s: backlog of %d accepted in %.1fs (%d errors), %d rows", name, d.Backlog, d.FillSeconds, d.FillErrors, d.Verify.RowsInDB)
	return nil
}
