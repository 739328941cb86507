package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// printReport writes the human tables.
func printReport(w io.Writer, r *Report) {
	m := r.Machine
	fmt.Fprintf(w, "\ncallgate benchmark  %s  commit %s\n", m.Date, m.Commit)
	raised := ""
	if m.ServerSettingsRaised {
		raised = ", raised for the run"
	}
	if m.ServerSettingsBelowWanted {
		raised = ", below make bench's server's: measured as it is"
	}
	fmt.Fprintf(w, "machine: %d x %s, %.0f GB, %s, %s; MariaDB %s (innodb_flush_log_at_trx_commit=%s, buffer pool %s MB, redo log %s MB%s), RabbitMQ %s\n",
		m.NProc, m.CPUModel, m.MemoryGB, m.Kernel, m.Go, m.MariaDB, m.InnoDBFlushLogAtTrxCommit, m.InnoDBBufferPoolMB, m.InnoDBLogFileMB, raised, m.RabbitMQ)
	fmt.Fprintf(w, "command: %s\n", r.Command)
	fmt.Fprintf(w, "machine busy in the second before the start: %.0f%% of one core\n", m.BusyBeforeStartPct)
	if b := r.Ratios.BaselinePerSecond; b > 0 {
		fmt.Fprintf(w, "every throughput below is also given as a ratio to this run's raw INSERT baseline, %.0f rows/s (column \"x base\")\n", b)
	}

	if r.Baseline != nil || r.PerRequest != nil || r.Group != nil {
		printIntake(w, r)
	}
	if len(r.Drains) > 0 {
		printDrains(w, r)
	}
	if r.OpenLoop != nil {
		printOpen(w, r)
	}
	if r.Sweep != nil {
		printSweep(w, r.Sweep)
	}
	if r.Cost != nil {
		printCost(w, r.Cost)
	}
	printResources(w, r)
	printMariaDB(w, r)

	fmt.Fprintf(w, "\nVERIFY\n")
	for _, c := range r.Checks {
		fmt.Fprintf(w, "  %-6s %-64s want %s, got %s\n", okWord(c.Met, "ok", "FAIL"), c.Name, c.Goal, c.Measured)
	}
	fmt.Fprintf(w, "\nTARGETS (ratios to this run's raw INSERT baseline)\n")
	for _, t := range r.Targets {
		word := okWord(t.Met, "met", "MISSED")
		if t.Skipped {
			word = "-"
		}
		fmt.Fprintf(w, "  %-6s %-62s %-26s %s\n", word, t.Name, t.Goal, t.Measured)
	}
	if r.TotalSeconds > 0 {
		fmt.Fprintf(w, "\ntotal run time %.0fs\n", r.TotalSeconds)
	}
}

// xbase formats a ratio to the baseline ("-" without one).
func xbase(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

func printIntake(w io.Writer, r *Report) {
	s := r.Settings
	fmt.Fprintf(w, "\nINTAKE, closed loop, no worker: %d concurrent clients, warm-up %.0fs (shown separately), measured %.0fs, %d-byte payloads\n",
		s.Concurrency, s.WarmupS, s.DurationS, s.PayloadBytes)
	fmt.Fprintf(w, "%-22s %-8s %9s %7s %8s %8s %8s %8s %8s %7s\n", "phase", "window", "ok/s", "x base", "p50 ms", "p95 ms", "p99 ms", "max ms", "n", "errors")
	row := func(name, win string, ws WindowStats, x string) {
		fmt.Fprintf(w, "%-22s %-8s %9.0f %7s %8.2f %8.2f %8.2f %8.1f %8d %7d\n", name, win, ws.OKPerSecond, x,
			ws.Latency.P50, ws.Latency.P95, ws.Latency.P99, ws.Latency.Max, ws.Latency.N, ws.Errors())
	}
	for _, p := range []struct {
		name string
		ph   *ClosedPhase
	}{{"baseline raw INSERT", r.Baseline}, {"per-request intake", r.PerRequest}, {"group-commit intake", r.Group}} {
		if p.ph == nil {
			continue
		}
		x := xbase(p.ph.RatioToBaseline)
		if p.ph == r.Baseline {
			x = "1.00x"
		}
		row(p.name, "warm-up", p.ph.Warmup, "")
		row("", "measured", p.ph.Measured, x)
		for _, e := range p.ph.FirstErrors {
			fmt.Fprintf(w, "%-22s   error: %s\n", "", e)
		}
	}
	if x := r.Ratios.GroupOverPerRequest; x > 0 {
		fmt.Fprintf(w, "group/per-request %.2fx\n", x)
	}
	for _, p := range []struct {
		name string
		ph   *ClosedPhase
	}{{"per-request", r.PerRequest}, {"group-commit", r.Group}} {
		if p.ph == nil {
			continue
		}
		v := p.ph.Verify
		fmt.Fprintf(w, "verify %-13s 200s %d, rows %d", p.name+":", v.Accepted, v.RowsInDB)
		if a := v.Announced; a != nil {
			fmt.Fprintf(w, "; %d messages (%d {\"log_id\"}, %d {\"log_ids\"}, up to %d ids each) announced %d distinct ids: missing %d, unexpected %d, duplicated %d",
				a.Messages, a.SingleIDMessages, a.BatchMessages, a.MaxIDsPerMessage, a.DistinctIDs, a.Missing, a.Unexpected, a.Duplicated)
			if len(a.MissingSample) > 0 {
				fmt.Fprintf(w, " (first missing: %v)", a.MissingSample)
			}
			fmt.Fprintf(w, "; announcer caught up %.2fs after the last 200", a.CaughtUpSeconds)
		}
		fmt.Fprintf(w, "; gateway announcements %s\n", fmtMap(v.Announcements))
	}
}

func printDrains(w io.Writer, r *Report) {
	fmt.Fprintf(w, "\nWORKER DRAIN: the worker alone (no intake running) works off a backlog of PENDING payment callbacks the group-commit gateway accepted and announced beforehand\n")
	fmt.Fprintf(w, "%-59s | %-34s | %-28s |\n", "", "CPU ms per processed callback", "MariaDB, per callback")
	fmt.Fprintf(w, "%-5s %8s %6s %7s %11s %6s %10s | %7s %8s %8s %8s | %10s %8s %8s | %8s\n", "batch", "backlog", "fill s", "drain s", "callbacks/s", "x base",
		"first-last", "worker", "mariadbd", "beam.smp", "machine", "statements", "commits", "fsyncs", "unrouted")
	for _, d := range r.Drains {
		c := d.CPUPerCallback
		fmt.Fprintf(w, "%-5d %8d %6.1f %7.1f %11.0f %6s %10.0f | %7.3f %8.3f %8.3f %8.3f | %10.2f %8.3f %8.3f | %8d\n",
			d.BatchSize, d.Backlog, d.FillSeconds, d.Seconds, d.PerSecond, xbase(d.RatioToBaseline), d.PerSecondFirstToLast,
			c["worker"], c["mariadbd"], c["beam.smp"], c["machine"], d.StatementsPerCallback, d.CommitsPerCallback, d.FsyncsPerCallback, d.Unrouted)
		for _, e := range d.FirstErrors {
			fmt.Fprintf(w, "  fill error: %s\n", e)
		}
	}
	if x := r.Ratios.DrainDefaultOverBatch1; x > 0 {
		fmt.Fprintf(w, "default batch size / batch_size 1: %.2fx\n", x)
	}
	for _, d := range r.Drains {
		fmt.Fprintf(w, "verify batch size %d: backlog 200s %d, rows %d; afterwards %d SUCCESS, %d FAILED, %d PENDING; outbox %d rows, %d SENT; worker outcomes %s; gateway announcements %s\n",
			d.BatchSize, d.Verify.Accepted, d.Verify.RowsInDB, d.Succeeded, d.Failed, d.Pending, d.OutboxRows, d.OutboxSent, fmtMap(d.WorkerOutcomes), fmtMap(d.Verify.Announcements))
	}
	fmt.Fprintf(w, "(drain s: from the worker ready to the whole backlog processed; first-last: callbacks/s between the first and the last processed_at;\n")
	fmt.Fprintf(w, " unrouted: downstream notifications kept in <prefix>.downstream.unrouted, no subscriber being bound in the benchmark)\n")
}

func printOpen(w io.Writer, r *Report) {
	ol, s := r.OpenLoop, r.Settings
	wk := "gateway and worker running"
	if !ol.Worker {
		wk = "NO worker"
	}
	fmt.Fprintf(w, "\nOPEN LOOP: %.0f req/s (%s the baseline) %s, warm-up %.0fs (excluded), measured %.0fs, %s; latency from the scheduled send time\n",
		ol.Rate, xbase(ol.RateRatio), ol.Arrivals, s.OpenWarmupS, s.OpenDurationS, wk)
	fmt.Fprintf(w, "%-10s %9s %7s %8s %8s %8s %9s %8s %8s %7s\n", "window", "ok/s", "x base", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms", "n", "errors")
	orow := func(win string, ws WindowStats, x string) {
		fmt.Fprintf(w, "%-10s %9.0f %7s %8.2f %8.2f %8.2f %9.2f %8.1f %8d %7d\n", win, ws.OKPerSecond, x,
			ws.Latency.P50, ws.Latency.P95, ws.Latency.P99, ws.Latency.P999, ws.Latency.Max, ws.Latency.N, ws.Errors())
	}
	orow("warm-up", ol.Warmup, "")
	orow("measured", ol.Measured, xbase(ratio(ol.Measured.OKPerSecond, r.Ratios.BaselinePerSecond)))
	for _, e := range ol.FirstErrors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	if len(ol.Slices) > 0 {
		fmt.Fprintf(w, "p99 by 10 s of scheduled time (warm-up included):")
		for _, sl := range ol.Slices {
			fmt.Fprintf(w, " %.0f-%.0fs %.0f", sl.From, sl.To, sl.Latency.P99)
		}
		fmt.Fprintf(w, " ms\n")
	}
	fmt.Fprintf(w, "from actual send: p50 %.2f  p99 %.2f  p99.9 %.2f ms; generator send lag p99 %.2f ms, max %.1f ms\n",
		ol.ServiceLatency.P50, ol.ServiceLatency.P99, ol.ServiceLatency.P999, ol.SendLag.P99, ol.SendLag.Max)
	if !ol.Worker {
		fmt.Fprintf(w, "no worker ran (-open-worker=false): the intake alone\n")
	}
	fmt.Fprintf(w, "verify open-loop: 200s %d, rows %d; gateway announcements %s; worker outcomes %s\n",
		ol.Verify.Accepted, ol.Verify.RowsInDB, fmtMap(ol.Verify.Announcements), fmtMap(ol.WorkerOutcomes))
	e := r.EndToEnd
	if e == nil {
		return
	}
	grew := "no"
	if ol.BacklogGrew {
		grew = "YES"
	}
	fmt.Fprintf(w, "backlog: PENDING %d at window start, %d at window end (grew: %s)\n", ol.PendingAtStart, ol.PendingAtEnd, grew)
	fmt.Fprintf(w, "processed/s: %.0f in the window (%s the baseline), %.0f first to last SUCCESS; SUCCESS %d of %d accepted\n",
		e.ProcessedPerSecondWindow, xbase(ol.ProcessedRatio), e.ProcessedPerSecondOverall, e.Succeeded, e.Accepted)
	if e.Drained {
		fmt.Fprintf(w, "every callback processed: last SUCCESS %.2f s after the last send\n", e.DrainSeconds)
	} else {
		fmt.Fprintf(w, "NOT every callback processed %.0f s after the last send: %d PENDING, %d FAILED left\n", s.DrainTimeoutS, e.StillPending, e.Failed)
	}
	fmt.Fprintf(w, "processing lag (processed_at - received_at), callbacks received in the window: p50 %.0f ms  p99 %.0f ms  max %.0f ms (n %d, %d unprocessed when read); every SUCCESS: p50 %.0f  p99 %.0f ms (n %d)\n",
		e.LagWindow.P50, e.LagWindow.P99, e.LagWindow.Max, e.LagWindow.N, e.LagWindowUnprocessed, e.LagAll.P50, e.LagAll.P99, e.LagAll.N)
	if c := ol.CPUPerProcessed; c != nil {
		fmt.Fprintf(w, "CPU per processed callback in the window (intake included): worker %.3f, mariadbd %.3f, gateway %.3f, beam.smp %.3f, machine %.3f ms\n",
			c["worker"], c["mariadbd"], c["gateway"], c["beam.smp"], c["machine"])
	}
	fmt.Fprintf(w, "worker's own announcements (compensation re-announcing PENDING callbacks older than its threshold, per-key wake-ups): %.0f, in %.0f compensation runs\n",
		e.WorkerAnnounced, e.CompensationRuns)
	fmt.Fprintf(w, "downstream: %.0f published/s in the window, %.0f published in total (worker metrics); outbox %d rows, %d SENT; %d notifications kept in <prefix>.downstream.unrouted (no subscriber bound)\n",
		e.DownstreamPerSecondWindow, e.DownstreamPublished, e.OutboxRows, e.OutboxSent, e.Unrouted)
}

func printSweep(w io.Writer, sw *Sweep) {
	fmt.Fprintf(w, "\nCAPACITY SWEEP: %s\n", sw.What)
	fmt.Fprintf(w, "%-8s %8s %8s %8s %8s %6s %10s %10s %9s %15s %11s %6s  %s\n", "x base", "rate/s", "ok/s", "p50 ms", "p99 ms", "errors",
		"lag p50 ms", "lag p99 ms", "worker/s", "PENDING s->e", "drain s", "busy", "result")
	for _, s := range sw.sortedSteps() {
		x := fmt.Sprintf("%.3gx", s.Ratio)
		if s.Bisect {
			x += "*"
		}
		drain := fmt.Sprintf("%.2f", s.DrainSeconds)
		if !s.Drained {
			drain = "not drained"
		}
		res := "pass"
		if !s.Pass {
			res = "FAIL: " + s.Why
		}
		fmt.Fprintf(w, "%-8s %8.0f %8.0f %8.2f %8.2f %6d %10.0f %10.0f %9.0f %15s %11s %5.0f%%  %s\n", x, s.Rate, s.OKPerSecond, s.P50Ms, s.P99Ms, s.Errors,
			s.LagP50Ms, s.LagP99Ms, s.ProcessedPerSecond, fmt.Sprintf("%d->%d", s.PendingAtStart, s.PendingAtEnd), drain, s.MachineBusyPct, res)
	}
	fmt.Fprintf(w, "(* bisection step; drain s: last send to last SUCCESS; busy: the whole machine in the window, %% of one core)\n")
	switch {
	case len(sw.Steps) == 0:
		fmt.Fprintf(w, "capacity: no step ran\n")
	case sw.CapacityRatio == 0:
		fmt.Fprintf(w, "capacity: no step passed (below %.3gx the baseline)\n", sw.sortedSteps()[0].Ratio)
	case sw.AtLeast:
		fmt.Fprintf(w, "capacity: at least %.3gx the baseline = %.0f req/s (every step passed)\n", sw.CapacityRatio, sw.CapacityRate)
	default:
		fmt.Fprintf(w, "capacity: %.3gx the baseline = %.0f req/s (the highest passing step)\n", sw.CapacityRatio, sw.CapacityRate)
	}
}

// window is one measured window of the resource tables.
type window struct {
	name      string
	res       Resources
	callbacks float64
	per       string
}

// windows lists the measured windows in phase order.
func (r *Report) windows() []window {
	var out []window
	if r.Baseline != nil {
		out = append(out, window{"baseline", r.Baseline.Resources, float64(r.Baseline.Measured.OK), "row"})
	}
	if r.PerRequest != nil {
		out = append(out, window{"per-request", r.PerRequest.Resources, float64(r.PerRequest.Measured.OK), "200"})
	}
	if r.Group != nil {
		out = append(out, window{"group-commit", r.Group.Resources, float64(r.Group.Measured.OK), "200"})
	}
	for _, d := range r.Drains {
		out = append(out, window{fmt.Sprintf("drain batch %d", d.BatchSize), d.Resources, float64(d.Processed), "processed callback (worker alone)"})
	}
	if ol := r.OpenLoop; ol != nil {
		out = append(out, window{"open loop", ol.Resources, float64(ol.Measured.OK), "200 (intake and worker)"})
		if e := r.EndToEnd; e != nil && e.DrainResources.WindowSeconds > 0 {
			out = append(out, window{"after open loop", e.DrainResources, float64(e.DrainProcessed), "processed callback (worker finishing)"})
		}
	}
	return out
}

func printResources(w io.Writer, r *Report) {
	m := r.Machine
	wins := r.windows()
	if len(wins) == 0 {
		return
	}
	fmt.Fprintf(w, "\nRESOURCES per measured window: CPU seconds (%% of one core; %d cores = %d%%) and peak RSS\n", m.NProc, 100*m.NProc)
	names := []string{"gateway", "worker", "mariadbd", "beam.smp", "loadgen"}
	fmt.Fprintf(w, "%-20s", "phase")
	for _, n := range names {
		fmt.Fprintf(w, " %-22s", n)
	}
	fmt.Fprintf(w, " %-14s %s\n", "other", "machine busy")
	for _, win := range wins {
		rs := win.res
		if rs.WindowSeconds == 0 {
			continue
		}
		fmt.Fprintf(w, "%-20s", win.name)
		for _, n := range names {
			u, ok := rs.Procs[n]
			if !ok {
				fmt.Fprintf(w, " %-22s", "-")
				continue
			}
			fmt.Fprintf(w, " %-22s", fmt.Sprintf("%5.1fs %4.0f%% %5.0fMB", u.CPUSeconds, u.CPUPercent, u.PeakRSSMB))
		}
		fmt.Fprintf(w, " %-14s %s\n", fmt.Sprintf("%5.1fs %4.0f%%", rs.Other.CPUSeconds, rs.Other.CPUPercent),
			fmt.Sprintf("%5.1fs %4.0f%%", rs.MachineBusy.CPUSeconds, rs.MachineBusy.CPUPercent))
	}
	fmt.Fprintf(w, "(gateway and worker RSS: VmHWM over the process's life; others: largest VmRSS sampled in the window)\n")
	fmt.Fprintf(w, "other = machine busy - the processes above: interrupts (loopback network softirq) and other processes on the machine:\n")
	for _, win := range wins {
		rs := win.res
		if rs.WindowSeconds == 0 {
			continue
		}
		top := strings.Join(rs.OtherTop, ", ")
		if top == "" {
			top = "-"
		}
		foreign := "none seen"
		if rs.ForeignQueryPct > 0 {
			foreign = fmt.Sprintf("%.0f%% of samples (%s)", rs.ForeignQueryPct, strings.Join(rs.ForeignDBs, ", "))
		}
		fmt.Fprintf(w, "  %-18s irq %.1fs; busiest others: %s; other databases' queries in MariaDB: %s\n", win.name, rs.IRQ.CPUSeconds, top, foreign)
	}
}

func printMariaDB(w io.Writer, r *Report) {
	wins := r.windows()
	if len(wins) == 0 {
		return
	}
	fmt.Fprintf(w, "\nMARIADB per measured window (global counters, whole server)\n")
	fmt.Fprintf(w, "%-20s %12s %10s %10s %12s %11s %12s %s\n", "phase", "statements/s", "commits/s", "fsyncs/s", "rows read/s", "lock waits", "disk reads/s", "statements (commits) per callback")
	for _, win := range wins {
		d, rs := win.res.MariaDB, win.res
		if d == nil || rs.WindowSeconds == 0 {
			continue
		}
		sec := rs.WindowSeconds
		perCB := "-"
		if win.callbacks > 0 {
			perCB = fmt.Sprintf("%.1f (%.2f) per %s", d["Questions"]/win.callbacks, d["Com_commit"]/win.callbacks, win.per)
		}
		fmt.Fprintf(w, "%-20s %12.0f %10.0f %10.0f %12.0f %11.0f %12.0f %s\n", win.name, d["Questions"]/sec, d["Com_commit"]/sec,
			d["Innodb_data_fsyncs"]/sec, d["Rows_read"]/sec, d["Innodb_row_lock_waits"], d["Innodb_buffer_pool_reads"]/sec, perCB)
	}
}

func okWord(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func fmtMap(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, m[k]))
	}
	return strings.Join(parts, " ")
}
