package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Machine says where and what was measured.
type Machine struct {
	Date                      string  `json:"date"`
	Commit                    string  `json:"commit"`
	NProc                     int     `json:"nproc"`
	CPUModel                  string  `json:"cpu_model"`
	MemoryGB                  float64 `json:"memory_gb"`
	Kernel                    string  `json:"kernel"`
	Go                        string  `json:"go"`
	MariaDB                   string  `json:"mariadb"`
	InnoDBFlushLogAtTrxCommit string  `json:"innodb_flush_log_at_trx_commit"`
	InnoDBBufferPoolMB        string  `json:"innodb_buffer_pool_mb"`
	RabbitMQ                  string  `json:"rabbitmq"`
	// BusyBeforeStartPct: CPU in use on the machine in the second before
	// the run (% of one core); high means someone else was busy too.
	BusyBeforeStartPct float64 `json:"busy_before_start_pct"`
}

// Settings are the run's parameters.
type Settings struct {
	Concurrency int     `json:"concurrency"`
	WarmupS     float64 `json:"warmup_s"`
	DurationS   float64 `json:"duration_s"`
	// Rate: -rate (0: OpenRatio x the baseline).
	Rate           float64 `json:"rate"`
	OpenRatio      float64 `json:"open_ratio"`
	DrainTimeoutS  float64 `json:"open_drain_timeout_s"`
	OpenWarmupS    float64 `json:"open_warmup_s"`
	OpenDurationS  float64 `json:"open_duration_s"`
	Arrivals       string  `json:"arrivals"`
	PayloadBytes   int     `json:"payload_bytes"`
	AnnounceBuffer int     `json:"announce_buffer_closed_loop"`
	LogLevel       string  `json:"log_level"`
}

// Target is one of the project's performance targets.
type Target struct {
	Name     string `json:"name"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
	Skipped  bool   `json:"skipped,omitempty"`
}

// Report is everything one run measured.
type Report struct {
	Command      string       `json:"command"`
	Machine      Machine      `json:"machine"`
	Settings     Settings     `json:"settings"`
	Baseline     *ClosedPhase `json:"baseline,omitempty"`
	PerRequest   *ClosedPhase `json:"per_request,omitempty"`
	Group        *ClosedPhase `json:"group_commit,omitempty"`
	OpenLoop     *OpenLoop    `json:"open_loop,omitempty"`
	EndToEnd     *EndToEnd    `json:"end_to_end,omitempty"`
	Ratios       Ratios       `json:"ratios"`
	Targets      []Target     `json:"targets"`
	Checks       []Target     `json:"correctness_checks"`
	TotalSeconds float64      `json:"total_seconds"`

	CorrectnessOK bool `json:"correctness_ok"`
	AllTargetsMet bool `json:"all_targets_met"`
}

// ran reports whether any phase produced figures.
func (r *Report) ran() bool {
	return r.Baseline != nil || r.PerRequest != nil || r.Group != nil || r.OpenLoop != nil
}

// Ratios of the measured throughputs.
type Ratios struct {
	GroupOverPerRequest float64 `json:"group_over_per_request"`
	GroupOverBaseline   float64 `json:"group_over_baseline"`
}

func newReport(b *bench) *Report {
	o := b.o
	return &Report{
		Command: strings.Join(os.Args, " "),
		Machine: machineInfo(),
		Settings: Settings{Concurrency: o.concurrency, WarmupS: o.warmup.Seconds(), DurationS: o.duration.Seconds(),
			Rate: o.rate, OpenRatio: o.openRatio, DrainTimeoutS: o.drainTimeout.Seconds(), OpenWarmupS: o.openWarmup.Seconds(), OpenDurationS: o.openDuration.Seconds(), Arrivals: o.arrivals,
			PayloadBytes: o.payloadBytes, AnnounceBuffer: o.announceBuf, LogLevel: o.logLevel},
	}
}

// evaluate computes the ratios, the correctness checks and the targets.
func (r *Report) evaluate() {
	if r.Group != nil && r.PerRequest != nil {
		r.Ratios.GroupOverPerRequest = ratio(r.Group.Measured.OKPerSecond, r.PerRequest.Measured.OKPerSecond)
	}
	if r.Group != nil && r.Baseline != nil {
		r.Ratios.GroupOverBaseline = ratio(r.Group.Measured.OKPerSecond, r.Baseline.Measured.OKPerSecond)
	}

	r.Checks = nil
	check := func(name string, ph *ClosedPhase, queue bool) {
		if ph == nil {
			return
		}
		v := ph.Verify
		r.Checks = append(r.Checks, Target{Name: name + ": one callback_log row per 200",
			Goal: fmt.Sprintf("%d rows", v.Accepted), Measured: fmt.Sprintf("%d rows", v.RowsInDB), Met: v.RowsMatch})
		if a := v.Announced; queue && a != nil {
			r.Checks = append(r.Checks, Target{Name: name + ": announced log ids = the 200s' log ids",
				Goal: fmt.Sprintf("%d ids", v.Accepted), Met: a.Match,
				Measured: fmt.Sprintf("%d ids in %d messages; missing %d, unexpected %d, duplicated %d, unreadable %d, 200s without a log id %d",
					a.DistinctIDs, a.Messages, a.Missing, a.Unexpected, a.Duplicated, a.Unreadable, a.NoLogID)})
		}
	}
	check("baseline", r.Baseline, false)
	check("per-request intake", r.PerRequest, true)
	check("group-commit intake", r.Group, true)
	if ol := r.OpenLoop; ol != nil {
		r.Checks = append(r.Checks, Target{Name: "open loop: one callback_log row per 200",
			Goal: fmt.Sprintf("%d rows", ol.Verify.Accepted), Measured: fmt.Sprintf("%d rows", ol.Verify.RowsInDB), Met: ol.Verify.RowsMatch})
	}
	if e := r.EndToEnd; e != nil && r.OpenLoop != nil {
		r.Checks = append(r.Checks, Target{Name: "end to end: no callback FAILED (every order exists)",
			Goal: "0 FAILED", Measured: fmt.Sprintf("%d FAILED", e.Failed), Met: e.Failed == 0})
		r.Checks = append(r.Checks, Target{Name: "end to end: two downstream messages per callback, all SENT",
			Goal: fmt.Sprintf("%d SENT", 2*e.Succeeded), Measured: fmt.Sprintf("%d rows, %d SENT", e.OutboxRows, e.OutboxSent),
			Met: e.OutboxRows == 2*e.Succeeded && e.OutboxSent == e.OutboxRows})
	}
	r.CorrectnessOK = true
	for _, c := range r.Checks {
		r.CorrectnessOK = r.CorrectnessOK && c.Met
	}

	r.Targets = nil
	add := func(t Target) { r.Targets = append(r.Targets, t) }
	skip := func(name, goal string) { add(Target{Name: name, Goal: goal, Measured: "not run", Skipped: true}) }
	if r.Group != nil && r.PerRequest != nil {
		add(Target{Name: "group-committed intake vs per-request", Goal: ">= 2x",
			Measured: fmt.Sprintf("%.2fx (%.0f vs %.0f accepted/s)", r.Ratios.GroupOverPerRequest, r.Group.Measured.OKPerSecond, r.PerRequest.Measured.OKPerSecond),
			Met:      r.Ratios.GroupOverPerRequest >= 2})
	} else {
		skip("group-committed intake vs per-request", ">= 2x")
	}
	if r.Group != nil && r.Baseline != nil {
		add(Target{Name: "group-committed intake vs raw INSERT baseline", Goal: ">= 0.9x",
			Measured: fmt.Sprintf("%.2fx (%.0f vs %.0f /s)", r.Ratios.GroupOverBaseline, r.Group.Measured.OKPerSecond, r.Baseline.Measured.OKPerSecond),
			Met:      r.Ratios.GroupOverBaseline >= 0.9})
	} else {
		skip("group-committed intake vs raw INSERT baseline", ">= 0.9x")
	}
	if g := r.Group; g != nil {
		add(Target{Name: "group-committed intake p99", Goal: "<= 50 ms", Measured: fmt.Sprintf("%.1f ms", g.Measured.Latency.P99), Met: g.Measured.Latency.P99 <= 50})
		add(Target{Name: "group-committed intake errors", Goal: "0", Measured: fmt.Sprintf("%d", g.Total.Errors()), Met: g.Total.Errors() == 0})
	} else {
		skip("group-committed intake p99", "<= 50 ms")
		skip("group-committed intake errors", "0")
	}
	if ol := r.OpenLoop; ol != nil {
		errs := ol.Measured.Errors() + ol.Warmup.Errors()
		add(Target{Name: fmt.Sprintf("open loop %.0f req/s p99 after warm-up", ol.Rate), Goal: "<= 50 ms",
			Measured: fmt.Sprintf("%.1f ms (p99.9 %.1f ms)", ol.Measured.Latency.P99, ol.Measured.Latency.P999), Met: ol.Measured.Latency.P99 <= 50})
		add(Target{Name: "open loop errors", Goal: "0", Measured: fmt.Sprintf("%d", errs), Met: errs == 0})
		if ol.Worker {
			add(Target{Name: "open loop backlog", Goal: "no growth", Measured: fmt.Sprintf("PENDING %d -> %d over the window; worker %.0f/s for %.0f/s accepted",
				ol.PendingAtStart, ol.PendingAtEnd, ol.ProcessedPerSecond, ol.Measured.OKPerSecond), Met: !ol.BacklogGrew})
		} else {
			skip("open loop backlog", "no growth")
		}
	} else {
		skip("open loop p99 after warm-up", "<= 50 ms")
		skip("open loop errors", "0")
		skip("open loop backlog", "no growth")
	}
	if e := r.EndToEnd; e != nil && r.OpenLoop != nil {
		m := fmt.Sprintf("%.2f s", e.DrainSeconds)
		if !e.Drained {
			m = fmt.Sprintf("not drained: %d of %d still PENDING, %d FAILED %.0f s after the last send", e.StillPending, e.Accepted, e.Failed, r.Settings.DrainTimeoutS)
		}
		add(Target{Name: "end to end: backlog drained after the last send", Goal: "<= 10 s", Measured: m, Met: e.Drained && e.DrainSeconds <= 10})
		lag := fmt.Sprintf("%.0f ms", e.LagWindow.P99)
		switch {
		case e.LagWindow.N == 0:
			lag = "no callback received in the window"
		case e.LagWindowUnprocessed > 0:
			lag += fmt.Sprintf(" (%d of the window's callbacks unprocessed when read, counted with their lag then)", e.LagWindowUnprocessed)
		}
		add(Target{Name: "end to end: processing lag p99", Goal: "< 2 s", Measured: lag, Met: e.Drained && e.LagWindow.N > 0 && e.LagWindow.P99 < 2000})
	} else {
		skip("end to end: backlog drained after the last send", "<= 10 s")
		skip("end to end: processing lag p99", "< 2 s")
	}
	var gw float64
	for _, ph := range []*ClosedPhase{r.PerRequest, r.Group} {
		if ph != nil {
			gw = max(gw, ph.GatewayRSSMB)
		}
	}
	if r.OpenLoop != nil {
		gw = max(gw, r.OpenLoop.GatewayRSSMB)
	}
	if gw > 0 {
		add(Target{Name: "gateway peak RSS", Goal: "< 150 MB", Measured: fmt.Sprintf("%.1f MB", gw), Met: gw < 150})
	} else {
		skip("gateway peak RSS", "< 150 MB")
	}
	if r.OpenLoop != nil && r.OpenLoop.WorkerRSSMB > 0 {
		add(Target{Name: "worker peak RSS", Goal: "< 150 MB", Measured: fmt.Sprintf("%.1f MB", r.OpenLoop.WorkerRSSMB), Met: r.OpenLoop.WorkerRSSMB < 150})
	} else {
		skip("worker peak RSS", "< 150 MB")
	}
	r.AllTargetsMet = true
	for _, t := range r.Targets {
		r.AllTargetsMet = r.AllTargetsMet && (t.Met || t.Skipped)
	}
}

func writeJSON(path string, r *Report) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}
