package main

import (
	"fmt"
	"io"
	"strings"

	"callgate/internal/store"
)

// ScaleReport is everything one make bench-scale run measured.
type ScaleReport struct {
	Command  string        `json:"command"`
	Settings ScaleSettings `json:"scale_settings"`
	// Empty: the phases on empty tables; Loaded: the same phases, at the
	// same open-loop rate, on the loaded tables (each a report of its
	// own, ratios to its own raw INSERT baseline).
	Empty     *Report    `json:"empty"`
	Load      *Load      `json:"load,omitempty"`
	Loaded    *Report    `json:"loaded,omitempty"`
	Retention *Retention `json:"retention,omitempty"`
	// Comparison: the figures the issue asks for, empty against loaded.
	Comparison    []Comparison `json:"comparison"`
	Checks        []Target     `json:"correctness_checks"`
	CorrectnessOK bool         `json:"correctness_ok"`
	TotalSeconds  float64      `json:"total_seconds"`
}

// ScaleSettings are make bench-scale's own parameters (each round's
// report has the phases').
type ScaleSettings struct {
	Callbacks   int `json:"callbacks"`
	Days        int `json:"days"`
	Connections int `json:"load_connections"`
	// OpenRate: the open loop's rate in both rounds and in retention.
	OpenRate            float64 `json:"open_rate"`
	RetentionReferenceS float64 `json:"retention_reference_s"`
	RetentionSettleMaxS float64 `json:"retention_settle_max_s"`
	RetentionMaxS       float64 `json:"retention_max_s"`
	RetentionBatchSize  int     `json:"retention_batch_size"`
}

// Comparison is one figure on empty and on loaded tables.
type Comparison struct {
	Name   string  `json:"name"`
	Unit   string  `json:"unit"`
	Empty  float64 `json:"empty"`
	Loaded float64 `json:"loaded"`
	// Ratio: loaded over empty (0: either missing).
	Ratio float64 `json:"loaded_over_empty"`
}

// evaluate fills the comparison and the checks.
func (sr *ScaleReport) evaluate() {
	for _, r := range []*Report{sr.Empty, sr.Loaded} {
		if r != nil && r.ran() {
			r.evaluate()
		}
	}
	sr.compare()
	sr.checks()
}

func (sr *ScaleReport) compare() {
	sr.Comparison = nil
	e, l := sr.Empty, sr.Loaded
	if e == nil || l == nil {
		return
	}
	add := func(name, unit string, fig func(r *Report) (float64, bool)) {
		a, okA := fig(e)
		b, okB := fig(l)
		if !okA && !okB {
			return
		}
		c := Comparison{Name: name, Unit: unit, Empty: a, Loaded: b}
		if okA && okB {
			c.Ratio = round(ratio(b, a), 2)
		}
		sr.Comparison = append(sr.Comparison, c)
	}
	closed := func(ph func(r *Report) *ClosedPhase, fig func(p *ClosedPhase) float64) func(r *Report) (float64, bool) {
		return func(r *Report) (float64, bool) {
			if p := ph(r); p != nil {
				return fig(p), true
			}
			return 0, false
		}
	}
	baseline := func(r *Report) *ClosedPhase { return r.Baseline }
	group := func(r *Report) *ClosedPhase { return r.Group }
	add("raw INSERT baseline", "rows/s", closed(baseline, func(p *ClosedPhase) float64 { return p.Measured.OKPerSecond }))
	add("intake alone (group commit)", "200s/s", closed(group, func(p *ClosedPhase) float64 { return p.Measured.OKPerSecond }))
	add("intake alone (group commit) p99", "ms", closed(group, func(p *ClosedPhase) float64 { return p.Measured.Latency.P99 }))
	for i := range e.Drains {
		size := e.Drains[i].BatchSize
		add(fmt.Sprintf("worker drain, batch size %d", size), "callbacks/s", func(r *Report) (float64, bool) {
			for _, d := range r.Drains {
				if d.BatchSize == size {
					return d.PerSecond, true
				}
			}
			return 0, false
		})
	}
	open := func(fig func(ol *OpenLoop, e *EndToEnd) float64) func(r *Report) (float64, bool) {
		return func(r *Report) (float64, bool) {
			if r.OpenLoop == nil || r.EndToEnd == nil {
				return 0, false
			}
			return fig(r.OpenLoop, r.EndToEnd), true
		}
	}
	rate := 0.0
	if e.OpenLoop != nil {
		rate = e.OpenLoop.Rate
	}
	at := fmt.Sprintf("open loop at %.0f/s", rate)
	add(at+": intake p99", "ms", open(func(ol *OpenLoop, _ *EndToEnd) float64 { return ol.Measured.Latency.P99 }))
	add(at+": intake p99.9", "ms", open(func(ol *OpenLoop, _ *EndToEnd) float64 { return ol.Measured.Latency.P999 }))
	add(at+": processed", "callbacks/s", open(func(ol *OpenLoop, _ *EndToEnd) float64 { return ol.ProcessedPerSecond }))
	add(at+": processing lag p50", "ms", open(func(_ *OpenLoop, e *EndToEnd) float64 { return e.LagWindow.P50 }))
	add(at+": processing lag p99", "ms", open(func(_ *OpenLoop, e *EndToEnd) float64 { return e.LagWindow.P99 }))
	add(at+": last SUCCESS after the last send", "s", open(func(_ *OpenLoop, e *EndToEnd) float64 { return e.DrainSeconds }))
}

func (sr *ScaleReport) checks() {
	sr.Checks = nil
	add := func(name string, ok bool, want, got string) {
		sr.Checks = append(sr.Checks, Target{Name: name, Goal: want, Measured: got, Met: ok})
	}
	for _, r := range []struct {
		name string
		rep  *Report
	}{{"empty tables", sr.Empty}, {"loaded tables", sr.Loaded}} {
		if r.rep == nil || !r.rep.ran() {
			continue
		}
		failed := []string{}
		for _, c := range r.rep.Checks {
			if !c.Met {
				failed = append(failed, c.Name)
			}
		}
		got := fmt.Sprintf("%d checks passed", len(r.rep.Checks))
		if len(failed) > 0 {
			got = "failed: " + strings.Join(failed, "; ")
		}
		add(r.name+": every check of the phases", r.rep.CorrectnessOK, "all", got)
	}
	if ld := sr.Load; ld != nil {
		ok := ld.Rows["callback_log"] == int64(ld.Callbacks) && ld.Rows["callback_attempt"] == int64(ld.Callbacks) &&
			ld.Rows["outbox"] == 2*int64(ld.Callbacks) && ld.Rows["callback_event"] == int64(ld.Callbacks)
		add("load: a row, an attempt, two outbox rows and an event per callback", ok,
			fmt.Sprintf("%d callbacks", ld.Callbacks), fmt.Sprintf("%d rows, %d attempts, %d outbox rows, %d events",
				ld.Rows["callback_log"], ld.Rows["callback_attempt"], ld.Rows["outbox"], ld.Rows["callback_event"]))
	}
	if rt := sr.Retention; rt != nil {
		if ol := rt.OpenLoop; ol != nil {
			// A 503 past the gateway's store timeout may have a row whose
			// commit went through (the platform's retry is answered as a
			// duplicate): a row per 200 and at most one per 503.
			v, unavailable := ol.Verify, ol.Warmup.Non2xx+ol.Measured.Non2xx
			extra := v.RowsInDB - v.Accepted
			add("retention open loop: a row per 200, at most one per 503", extra >= 0 && extra <= unavailable,
				fmt.Sprintf("%d to %d rows", v.Accepted, v.Accepted+unavailable), fmt.Sprintf("%d rows (%d 200s, %d non-2xx)", v.RowsInDB, v.Accepted, unavailable))
		}
		if e := rt.EndToEnd; e != nil {
			add("retention open loop: no callback FAILED", e.Failed == 0, "0 FAILED", fmt.Sprintf("%d FAILED", e.Failed))
		}
		if d := rt.Delete; d.RowsAfter != nil {
			ok := true
			for _, t := range store.DayPartitioned {
				ok = ok && d.RowsAfter[t] == 0 && d.Deleted[t] == d.Rows[t]
			}
			add("old DELETE: every row of its day deleted, none other", ok, fmt.Sprintf("deleted %s", fmtRows(d.Rows)),
				fmt.Sprintf("deleted %s, %s left", fmtRows(d.Deleted), fmtRows(d.RowsAfter)))
		}
		if d := rt.Drop; d.Seconds > 0 {
			add("DROP PARTITION: the day's partition gone from every table", d.Gone, "gone", okWord(d.Gone, "gone", "still there"))
		}
	}
	sr.CorrectnessOK = len(sr.Checks) > 0
	for _, c := range sr.Checks {
		sr.CorrectnessOK = sr.CorrectnessOK && c.Met
	}
}

// fmtRows is per-table row counts, in the day-partitioned tables' order.
func fmtRows(m map[string]int64) string {
	parts := make([]string, 0, len(store.DayPartitioned))
	for _, t := range store.DayPartitioned {
		parts = append(parts, fmt.Sprintf("%s %d", t, m[t]))
	}
	return strings.Join(parts, ", ")
}

// printScale writes both rounds' reports, then the comparison and
// retention.
func printScale(w io.Writer, sr *ScaleReport) {
	if sr.Empty != nil && sr.Empty.ran() {
		fmt.Fprintf(w, "\n==================== ON EMPTY TABLES ====================\n")
		printReport(w, sr.Empty)
	}
	if sr.Loaded != nil && sr.Loaded.ran() {
		fmt.Fprintf(w, "\n==================== ON LOADED TABLES ====================\n")
		printReport(w, sr.Loaded)
	}
	fmt.Fprintf(w, "\n==================== AT SCALE ====================\n")
	if ld := sr.Load; ld != nil {
		fmt.Fprintf(w, "\nLOAD: %d callbacks over %d UTC days (%s .. %s), a partition each: %d attempts, %d outbox rows (SENT), %d events; %d-byte payloads\n",
			ld.Callbacks, ld.Days, ld.FirstDay, ld.LastDay, ld.Rows["callback_attempt"], ld.Rows["outbox"], ld.Rows["callback_event"], sr.Empty.Settings.PayloadBytes)
		fmt.Fprintf(w, "took %.0f s = %.0f callbacks/s (partitions %.1f s, INSERT ... SELECT %.0f s on %d connections, ANALYZE and flush %.0f s)\n",
			ld.Seconds, ld.CallbacksPerSecond, ld.PartitionSeconds, ld.InsertSeconds, ld.Connections, ld.FlushSeconds)
		fmt.Fprintf(w, "size: %s MB (data and indexes), %.0f MB in all (estimated %.0f MB); %.1f GB free afterwards on MariaDB's disk\n",
			fmtMB(ld.TableMB), ld.totalMB(), ld.EstimatedMB, ld.DiskFreeMB/1024)
	}
	if len(sr.Comparison) > 0 {
		fmt.Fprintf(w, "\nEMPTY vs LOADED tables (same phases, same open-loop rate, one run)\n")
		fmt.Fprintf(w, "%-58s %-12s %10s %10s %8s\n", "figure", "unit", "empty", "loaded", "ratio")
		for _, c := range sr.Comparison {
			x := "-"
			if c.Ratio > 0 {
				x = fmt.Sprintf("%.2fx", c.Ratio)
			}
			fmt.Fprintf(w, "%-58s %-12s %10.1f %10.1f %8s\n", c.Name, c.Unit, c.Empty, c.Loaded, x)
		}
	}
	if rt := sr.Retention; rt != nil {
		printRetention(w, rt)
	}
	fmt.Fprintf(w, "\nVERIFY (bench-scale)\n")
	for _, c := range sr.Checks {
		fmt.Fprintf(w, "  %-6s %-70s want %s, got %s\n", okWord(c.Met, "ok", "FAIL"), c.Name, c.Goal, c.Measured)
	}
	if sr.TotalSeconds > 0 {
		fmt.Fprintf(w, "\ntotal run time %.0fs\n", sr.TotalSeconds)
	}
}

func printRetention(w io.Writer, rt *Retention) {
	fmt.Fprintf(w, "\nRETENTION at scale: %s\n", rt.What)
	d, p := rt.Delete, rt.Drop
	fmt.Fprintf(w, "old DELETE of %s (%s): %.1f s, %d batches, longest %.0f ms; deleted %s; history list length %d before, %d after, peak %d; purge %s\n",
		d.Day, fmtRows(d.Rows), d.Seconds, d.Batches, d.LongestBatchMs, fmtRows(d.Deleted), d.HistoryBefore, d.HistoryAfter, d.HistoryPeak,
		okWord(d.PurgeDone, fmt.Sprintf("caught up %.1f s after", d.PurgeSeconds), fmt.Sprintf("NOT caught up %.0f s after", d.PurgeSeconds)))
	per := make([]string, 0, len(store.DayPartitioned))
	for _, t := range store.DayPartitioned {
		per = append(per, fmt.Sprintf("%s %.3f s", t, p.PerTableSeconds[t]))
	}
	fmt.Fprintf(w, "DROP PARTITION %s of %s (%s): %.3f s (%s)\n", p.Partition, p.Day, fmtRows(p.Rows), p.Seconds, strings.Join(per, ", "))
	fmt.Fprintf(w, "intake latency from scheduled send time of the requests in flight during each span:\n")
	fmt.Fprintf(w, "%-24s %8s %8s %8s %8s %9s %9s %8s %7s\n", "span", "seconds", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms", "n", "errors")
	for _, s := range rt.Spans {
		fmt.Fprintf(w, "%-24s %8.1f %8.2f %8.2f %8.2f %9.2f %9.1f %8d %7d\n", s.Name, s.ToS-s.FromS, s.Latency.P50, s.Latency.P95, s.Latency.P99,
			s.Latency.P999, s.Latency.Max, s.Latency.N, s.Errors)
	}
	if ol, e := rt.OpenLoop, rt.EndToEnd; ol != nil && e != nil {
		fmt.Fprintf(w, "the whole open loop: %.0f accepted/s, intake p99 %.1f ms, %d non-2xx; processing lag p99 %.0f ms; %d SUCCESS, %d FAILED, %d PENDING; %d rows for %d 200s\n",
			ol.Measured.OKPerSecond, ol.Measured.Latency.P99, ol.Warmup.Non2xx+ol.Measured.Non2xx, e.LagWindow.P99, e.Succeeded, e.Failed, e.StillPending,
			ol.Verify.RowsInDB, ol.Verify.Accepted)
		for _, err := range ol.FirstErrors {
			fmt.Fprintf(w, "  error: %s\n", err)
		}
	}
}

// fmtMB is per-table MB, in the load's order.
func fmtMB(m map[string]float64) string {
	parts := make([]string, 0, len(loadedTables))
	for _, t := range loadedTables {
		parts = append(parts, fmt.Sprintf("%s %.0f", t, m[t]))
	}
	return strings.Join(parts, ", ")
}
