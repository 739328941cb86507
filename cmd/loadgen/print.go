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
	fmt.Fprintf(w, "machine: %d x %s, %.0f GB, %s, %s; MariaDB %s (innodb_flush_log_at_trx_commit=%s, buffer pool %s MB), RabbitMQ %s\n",
		m.NProc, m.CPUModel, m.MemoryGB, m.Kernel, m.Go, m.MariaDB, m.InnoDBFlushLogAtTrxCommit, m.InnoDBBufferPoolMB, m.RabbitMQ)
	fmt.Fprintf(w, "command: %s\n", r.Command)
	fmt.Fprintf(w, "machine busy in the second before the start: %.0f%% of one core\n", m.BusyBeforeStartPct)

	if r.Baseline != nil || r.PerRequest != nil || r.Group != nil {
		printIntake(w, r)
	}
	printRest(w, r)
}

func printIntake(w io.Writer, r *Report) {
	s := r.Settings
	fmt.Fprintf(w, "\nINTAKE, closed loop: %d concurrent clients, warm-up %.0fs (shown separately), measured %.0fs, %d-byte payloads\n",
		s.Concurrency, s.WarmupS, s.DurationS, s.PayloadBytes)
	fmt.Fprintf(w, "%-22s %-8s %9s %8s %8s %8s %8s %8s %7s\n", "phase", "window", "ok/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "n", "errors")
	row := func(name, win string, ws WindowStats) {
		fmt.Fprintf(w, "%-22s %-8s %9.0f %8.2f %8.2f %8.2f %8.1f %8d %7d\n", name, win, ws.OKPerSecond,
			ws.Latency.P50, ws.Latency.P95, ws.Latency.P99, ws.Latency.Max, ws.Latency.N, ws.Errors())
	}
	for _, p := range []struct {
		name string
		ph   *ClosedPhase
	}{{"baseline raw INSERT", r.Baseline}, {"per-request intake", r.PerRequest}, {"group-commit intake", r.Group}} {
		if p.ph == nil {
			continue
		}
		row(p.name, "warm-up", p.ph.Warmup)
		row("", "measured", p.ph.Measured)
		for _, e := range p.ph.FirstErrors {
			fmt.Fprintf(w, "%-22s   error: %s\n", "", e)
		}
	}
	if r.Ratios.GroupOverPerRequest > 0 || r.Ratios.GroupOverBaseline > 0 {
		fmt.Fprintf(w, "ratios: group/per-request %.2fx   group/baseline %.2fx\n", r.Ratios.GroupOverPerRequest, r.Ratios.GroupOverBaseline)
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

func printRest(w io.Writer, r *Report) {
	m, s := r.Machine, r.Settings
	if ol := r.OpenLoop; ol != nil {
		wk := "worker running"
		if !ol.Worker {
			wk = "NO worker"
		}
		fmt.Fprintf(w, "\nOPEN LOOP: %.0f req/s (%.2fx the baseline) %s, warm-up %.0fs (excluded), measured %.0fs, %s; latency from the scheduled send time\n",
			ol.Rate, ol.RateRatio, ol.Arrivals, s.OpenWarmupS, s.OpenDurationS, wk)
		fmt.Fprintf(w, "%-10s %9s %8s %8s %8s %9s %8s %8s %7s\n", "window", "ok/s", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms", "n", "errors")
		orow := func(win string, ws WindowStats) {
			fmt.Fprintf(w, "%-10s %9.0f %8.2f %8.2f %8.2f %9.2f %8.1f %8d %7d\n", win, ws.OKPerSecond,
				ws.Latency.P50, ws.Latency.P95, ws.Latency.P99, ws.Latency.P999, ws.Latency.Max, ws.Latency.N, ws.Errors())
		}
		orow("warm-up", ol.Warmup)
		orow("measured", ol.Measured)
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
		grew := "no"
		if ol.BacklogGrew {
			grew = "YES"
		}
		if ol.Worker {
			fmt.Fprintf(w, "backlog: PENDING %d at window start, %d at window end (grew: %s); worker processed %.0f/s in the window\n",
				ol.PendingAtStart, ol.PendingAtEnd, grew, ol.ProcessedPerSecond)
		} else {
			fmt.Fprintf(w, "no worker ran (-open-worker=false): the intake alone\n")
		}
		fmt.Fprintf(w, "verify open-loop: 200s %d, rows %d; announcements %s; worker outcomes %s\n",
			ol.Verify.Accepted, ol.Verify.RowsInDB, fmtMap(ol.Verify.Announcements), fmtMap(ol.WorkerOutcomes))
	}
	if e := r.EndToEnd; e != nil && r.OpenLoop != nil {
		fmt.Fprintf(w, "\nEND TO END (the open-loop load)\n")
		drain := fmt.Sprintf("%.2f s", e.DrainSeconds)
		if !e.Drained {
			drain = fmt.Sprintf("NOT DRAINED (%d PENDING, %d FAILED left)", e.StillPending, e.Failed)
		}
		fmt.Fprintf(w, "processed/s: %.0f in the window, %.0f first to last SUCCESS; SUCCESS %d of %d accepted\n",
			e.ProcessedPerSecondWindow, e.ProcessedPerSecondOverall, e.Succeeded, e.Accepted)
		fmt.Fprintf(w, "last send -> last SUCCESS: %s\n", drain)
		fmt.Fprintf(w, "processing lag (processed_at - received_at), callbacks received in the window: p50 %.0f ms  p99 %.0f ms  max %.0f ms (n %d, %d unprocessed when read); every SUCCESS: p50 %.0f  p99 %.0f ms (n %d)\n",
			e.LagWindow.P50, e.LagWindow.P99, e.LagWindow.Max, e.LagWindow.N, e.LagWindowUnprocessed, e.LagAll.P50, e.LagAll.P99, e.LagAll.N)
		if c := r.OpenLoop.CPUPerProcessed; c != nil {
			fmt.Fprintf(w, "CPU per processed callback in the window (intake included): worker %.3f, mariadbd %.3f, gateway %.3f, beam.smp %.3f, machine %.3f ms\n",
				c["worker"], c["mariadbd"], c["gateway"], c["beam.smp"], c["machine"])
		}
		if dr := e.DrainResources; e.DrainProcessed > 0 && dr.WindowSeconds > 0 {
			per := func(n string) float64 { return 1000 * dr.Procs[n].CPUSeconds / float64(e.DrainProcessed) }
			fmt.Fprintf(w, "worker finishing after the last send: %.0f callbacks/s; CPU per callback: worker %.2f ms, mariadbd %.2f ms, beam.smp %.2f ms (machine busy %.0f%%)\n",
				float64(e.DrainProcessed)/dr.WindowSeconds, per("worker"), per("mariadbd"), per("beam.smp"), dr.MachineBusy.CPUPercent)
		}
		fmt.Fprintf(w, "worker's own announcements (compensation re-announcing PENDING callbacks older than its threshold, per-key wake-ups): %.0f, in %.0f compensation runs\n",
			e.WorkerAnnounced, e.CompensationRuns)
		fmt.Fprintf(w, "downstream: %.0f published/s in the window, %.0f published in total (worker metrics); outbox %d rows, %d SENT; %d notifications kept in <prefix>.downstream.unrouted (no subscriber bound)\n",
			e.DownstreamPerSecondWindow, e.DownstreamPublished, e.OutboxRows, e.OutboxSent, e.Unrouted)
	}

	fmt.Fprintf(w, "\nRESOURCES per measured window: CPU seconds (%% of one core; %d cores = %d%%) and peak RSS\n", m.NProc, 100*m.NProc)
	names := []string{"gateway", "worker", "mariadbd", "beam.smp", "loadgen"}
	fmt.Fprintf(w, "%-20s", "phase")
	for _, n := range names {
		fmt.Fprintf(w, " %-22s", n)
	}
	fmt.Fprintf(w, " %-14s %s\n", "other", "machine busy")
	res := func(name string, rs Resources) {
		if rs.WindowSeconds == 0 {
			return
		}
		fmt.Fprintf(w, "%-20s", name)
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
	if r.Baseline != nil {
		res("baseline", r.Baseline.Resources)
	}
	if r.PerRequest != nil {
		res("per-request", r.PerRequest.Resources)
	}
	if r.Group != nil {
		res("group-commit", r.Group.Resources)
	}
	if r.OpenLoop != nil {
		res("open loop", r.OpenLoop.Resources)
	}
	if r.EndToEnd != nil && r.OpenLoop != nil {
		res("drain after open", r.EndToEnd.DrainResources)
	}
	fmt.Fprintf(w, "(gateway and worker RSS: VmHWM over the process's life; others: largest VmRSS sampled in the window)\n")
	fmt.Fprintf(w, "other = machine busy - the processes above: interrupts (loopback network softirq) and other processes on the machine:\n")
	others := func(name string, rs Resources) {
		if rs.WindowSeconds == 0 {
			return
		}
		top := strings.Join(rs.OtherTop, ", ")
		if top == "" {
			top = "-"
		}
		foreign := "none seen"
		if rs.ForeignQueryPct > 0 {
			foreign = fmt.Sprintf("%.0f%% of samples (%s)", rs.ForeignQueryPct, strings.Join(rs.ForeignDBs, ", "))
		}
		fmt.Fprintf(w, "  %-18s irq %.1fs; busiest others: %s; other databases' queries in MariaDB: %s\n", name, rs.IRQ.CPUSeconds, top, foreign)
	}
	if r.Baseline != nil {
		others("baseline", r.Baseline.Resources)
	}
	if r.PerRequest != nil {
		others("per-request", r.PerRequest.Resources)
	}
	if r.Group != nil {
		others("group-commit", r.Group.Resources)
	}
	if r.OpenLoop != nil {
		others("open loop", r.OpenLoop.Resources)
	}
	if r.EndToEnd != nil && r.OpenLoop != nil {
		others("drain after open", r.EndToEnd.DrainResources)
	}

	fmt.Fprintf(w, "\nMARIADB per measured window (global counters, whole server)\n")
	fmt.Fprintf(w, "%-20s %12s %10s %10s %12s %11s %12s %s\n", "phase", "statements/s", "commits/s", "fsyncs/s", "rows read/s", "lock waits", "disk reads/s", "statements (commits) per callback")
	dbrow := func(name string, rs Resources, callbacks float64, per string) {
		d := rs.MariaDB
		if d == nil || rs.WindowSeconds == 0 {
			return
		}
		sec := rs.WindowSeconds
		perCB := "-"
		if callbacks > 0 {
			perCB = fmt.Sprintf("%.1f (%.2f) per %s", d["Questions"]/callbacks, d["Com_commit"]/callbacks, per)
		}
		fmt.Fprintf(w, "%-20s %12.0f %10.0f %10.0f %12.0f %11.0f %12.0f %s\n", name, d["Questions"]/sec, d["Com_commit"]/sec,
			d["Innodb_data_fsyncs"]/sec, d["Rows_read"]/sec, d["Innodb_row_lock_waits"], d["Innodb_buffer_pool_reads"]/sec, perCB)
	}
	if r.Baseline != nil {
		dbrow("baseline", r.Baseline.Resources, float64(r.Baseline.Measured.OK), "row")
	}
	if r.PerRequest != nil {
		dbrow("per-request", r.PerRequest.Resources, float64(r.PerRequest.Measured.OK), "200")
	}
	if r.Group != nil {
		dbrow("group-commit", r.Group.Resources, float64(r.Group.Measured.OK), "200")
	}
	if r.OpenLoop != nil {
		dbrow("open loop", r.OpenLoop.Resources, float64(r.OpenLoop.Measured.OK), "200 (intake and worker)")
	}
	if r.EndToEnd != nil && r.OpenLoop != nil {
		dbrow("drain after open", r.EndToEnd.DrainResources, float64(r.EndToEnd.DrainProcessed), "processed callback (worker alone)")
	}

	fmt.Fprintf(w, "\nVERIFY\n")
	for _, c := range r.Checks {
		fmt.Fprintf(w, "  %-6s %-64s want %s, got %s\n", okWord(c.Met, "ok", "FAIL"), c.Name, c.Goal, c.Measured)
	}
	fmt.Fprintf(w, "\nTARGETS\n")
	for _, t := range r.Targets {
		word := okWord(t.Met, "met", "MISSED")
		if t.Skipped {
			word = "-"
		}
		fmt.Fprintf(w, "  %-6s %-48s %-10s %s\n", word, t.Name, t.Goal, t.Measured)
	}
	if r.TotalSeconds > 0 {
		fmt.Fprintf(w, "\ntotal run time %.0fs\n", r.TotalSeconds)
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
