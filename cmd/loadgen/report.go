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
	InnoDBLogFileMB           string  `json:"innodb_log_file_mb"`
	// ServerSettingsRaised: the run gave MariaDB a larger buffer pool or
	// redo log than it had, restored at the end (older reports; loadgen no
	// longer changes a server's settings: always false).
	ServerSettingsRaised bool `json:"server_settings_raised"`
	// ServerSettingsBelowWanted: -server-settings=false measured a MariaDB
	// with a smaller buffer pool or redo log than make bench's server has
	// (server.go).
	ServerSettingsBelowWanted bool   `json:"server_settings_below_wanted,omitempty"`
	RabbitMQ                  string `json:"rabbitmq"`
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
	Rate           float64   `json:"rate"`
	OpenRatio      float64   `json:"open_ratio"`
	OpenWarmupS    float64   `json:"open_warmup_s"`
	OpenDurationS  float64   `json:"open_duration_s"`
	Arrivals       string    `json:"arrivals"`
	PayloadBytes   int       `json:"payload_bytes"`
	AnnounceBuffer int       `json:"announce_buffer_closed_loop"`
	LogLevel       string    `json:"log_level"`
	DrainBacklog   int       `json:"drain_backlog"`
	Drain1Backlog  int       `json:"drain_batch_size_1_backlog"`
	DrainMaxS      float64   `json:"drain_max_s"`
	DrainTimeoutS  float64   `json:"open_drain_timeout_s"`
	SweepRatios    []float64 `json:"sweep_ratios"`
	SweepWarmupS   float64   `json:"sweep_warmup_s"`
	SweepStepS     float64   `json:"sweep_step_s"`
	SweepBisect    bool      `json:"sweep_bisect"`
	// WorkerBatchSize: worker.batch_size of -config (the drain's default
	// and the one of the open loop and the sweep).
	WorkerBatchSize int `json:"worker_batch_size"`
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
	Command    string       `json:"command"`
	Machine    Machine      `json:"machine"`
	Settings   Settings     `json:"settings"`
	Baseline   *ClosedPhase `json:"baseline,omitempty"`
	PerRequest *ClosedPhase `json:"per_request,omitempty"`
	Group      *ClosedPhase `json:"group_commit,omitempty"`
	// Drains: worker.batch_size 1, then the configured batch size.
	Drains       []*Drain  `json:"drains,omitempty"`
	OpenLoop     *OpenLoop `json:"open_loop,omitempty"`
	EndToEnd     *EndToEnd `json:"end_to_end,omitempty"`
	Sweep        *Sweep    `json:"sweep,omitempty"`
	Cost         *Cost     `json:"cost,omitempty"`
	Ratios       Ratios    `json:"ratios"`
	Targets      []Target  `json:"targets"`
	Checks       []Target  `json:"correctness_checks"`
	TotalSeconds float64   `json:"total_seconds"`

	CorrectnessOK bool `json:"correctness_ok"`
	AllTargetsMet bool `json:"all_targets_met"`
}

// ran reports whether any phase produced figures.
func (r *Report) ran() bool {
	return r.Baseline != nil || r.PerRequest != nil || r.Group != nil || len(r.Drains) > 0 || r.OpenLoop != nil || r.Sweep != nil || r.Cost != nil
}

// drainBatch1 and drainDefault are the drains with worker.batch_size 1 and
// with the configured batch size (nil: not run).
func (r *Report) drainBatch1() *Drain {
	if len(r.Drains) < 1 {
		return nil
	}
	return r.Drains[0]
}

func (r *Report) drainDefault() *Drain {
	if len(r.Drains) < 2 {
		return nil
	}
	return r.Drains[1]
}

// Ratios of the measured throughputs: each phase's over the raw INSERT
// baseline of the same run (BaselinePerSecond), unless named otherwise; 0
// when a phase did not run.
type Ratios struct {
	BaselinePerSecond      float64 `json:"baseline_per_second"`
	PerRequest             float64 `json:"per_request"`
	Group                  float64 `json:"group"`
	GroupOverPerRequest    float64 `json:"group_over_per_request"`
	DrainBatch1            float64 `json:"drain_batch_size_1"`
	DrainDefault           float64 `json:"drain_default_batch_size"`
	DrainDefaultOverBatch1 float64 `json:"drain_default_over_batch_size_1"`
	// OpenRate: the open loop's offered rate; OpenProcessed: what the
	// worker processed in its window.
	OpenRate      float64 `json:"open_rate"`
	OpenProcessed float64 `json:"open_processed"`
	SweepCapacity float64 `json:"sweep_capacity"`
}

func newReport(b *bench) *Report {
	o := b.o
	return &Report{
		Command: strings.Join(os.Args, " "),
		Machine: machineInfo(),
		Settings: Settings{Concurrency: o.concurrency, WarmupS: o.warmup.Seconds(), DurationS: o.duration.Seconds(),
			Rate: o.rate, OpenRatio: o.openRatio, OpenWarmupS: o.openWarmup.Seconds(), OpenDurationS: o.openDuration.Seconds(), Arrivals: o.arrivals,
			PayloadBytes: o.payloadBytes, AnnounceBuffer: o.announceBuf, LogLevel: o.logLevel,
			DrainBacklog: o.drainBacklog, Drain1Backlog: o.drain1Backlog, DrainMaxS: o.drainMax.Seconds(), DrainTimeoutS: o.drainTimeout.Seconds(),
			SweepRatios: o.sweepRatios, SweepWarmupS: o.sweepWarmup.Seconds(), SweepStepS: o.sweepStep.Seconds(), SweepBisect: o.sweepBisect},
	}
}

// The targets (ratios to the run's raw INSERT baseline), judged on
// the unrounded figures (the report shows ratios to two decimals).
const (
	targetDrainRatio       = 0.3 // worker drain, default batch size
	targetDrainOverBatch1  = 3.0 // default batch size over batch_size 1
	targetIntakeRatio      = 1.0 // intake alone
	targetCPUPerCallbackMs = 0.3 // mariadbd and worker, each
)

// evaluate computes the ratios, the correctness checks and the targets.
func (r *Report) evaluate() {
	r.ratios()
	r.checks()
	r.targets()
}

func (r *Report) ratios() {
	x := &r.Ratios
	if r.Baseline != nil {
		x.BaselinePerSecond = r.Baseline.Measured.OKPerSecond
	}
	for _, ph := range []*ClosedPhase{r.PerRequest, r.Group} {
		if ph != nil {
			ph.RatioToBaseline = ratio(ph.Measured.OKPerSecond, x.BaselinePerSecond)
		}
	}
	if r.PerRequest != nil {
		x.PerRequest = r.PerRequest.RatioToBaseline
	}
	if r.Group != nil {
		x.Group = r.Group.RatioToBaseline
	}
	if r.Group != nil && r.PerRequest != nil {
		x.GroupOverPerRequest = ratio(r.Group.Measured.OKPerSecond, r.PerRequest.Measured.OKPerSecond)
	}
	if d := r.drainBatch1(); d != nil {
		x.DrainBatch1 = d.RatioToBaseline
	}
	if d := r.drainDefault(); d != nil {
		x.DrainDefault = d.RatioToBaseline
		if d1 := r.drainBatch1(); d1 != nil {
			x.DrainDefaultOverBatch1 = ratio(d.PerSecond, d1.PerSecond)
		}
	}
	if ol := r.OpenLoop; ol != nil {
		x.OpenRate, x.OpenProcessed = ol.RateRatio, ol.ProcessedRatio
	}
	if r.Sweep != nil {
		x.SweepCapacity = r.Sweep.CapacityRatio
	}
}

func (r *Report) checks() {
	r.Checks = nil
	add := func(name string, ok bool, want, got string) {
		r.Checks = append(r.Checks, Target{Name: name, Goal: want, Measured: got, Met: ok})
	}
	rows := func(name string, v Verify) {
		add(name+": one callback_log row per 200", v.RowsMatch, fmt.Sprintf("%d rows", v.Accepted), fmt.Sprintf("%d rows", v.RowsInDB))
	}
	outbox := func(name string, succeeded, rows, sent int) {
		add(name+": two downstream messages per SUCCESS, all SENT", rows == 2*succeeded && sent == rows,
			fmt.Sprintf("%d SENT", 2*succeeded), fmt.Sprintf("%d rows, %d SENT", rows, sent))
	}
	if r.Baseline != nil {
		rows("baseline", r.Baseline.Verify)
	}
	for _, p := range []struct {
		name string
		ph   *ClosedPhase
	}{{"per-request intake", r.PerRequest}, {"group-commit intake", r.Group}} {
		if p.ph == nil {
			continue
		}
		rows(p.name, p.ph.Verify)
		if a := p.ph.Verify.Announced; a != nil {
			add(p.name+": announced log ids = the 200s' log ids", a.Match, fmt.Sprintf("%d ids", p.ph.Verify.Accepted),
				fmt.Sprintf("%d ids in %d messages; missing %d, unexpected %d, duplicated %d, unreadable %d, 200s without a log id %d",
					a.DistinctIDs, a.Messages, a.Missing, a.Unexpected, a.Duplicated, a.Unreadable, a.NoLogID))
		}
	}
	for _, d := range r.Drains {
		name := fmt.Sprintf("drain batch size %d", d.BatchSize)
		rows(name+" (the backlog)", d.Verify)
		add(name+": every callback SUCCESS afterwards", d.Drained, fmt.Sprintf("%d SUCCESS", d.Backlog),
			fmt.Sprintf("%d SUCCESS, %d FAILED, %d PENDING", d.Succeeded, d.Failed, d.Pending))
		outbox(name, d.Succeeded, d.OutboxRows, d.OutboxSent)
	}
	if ol := r.OpenLoop; ol != nil {
		rows("open loop", ol.Verify)
		if e := r.EndToEnd; e != nil {
			add("open loop: no callback FAILED", e.Failed == 0, "0 FAILED", fmt.Sprintf("%d FAILED", e.Failed))
			outbox("open loop", e.Succeeded, e.OutboxRows, e.OutboxSent)
		}
	}
	if sw := r.Sweep; sw != nil && len(sw.Steps) > 0 {
		ok, bad := true, []string{}
		for _, s := range sw.Steps {
			if !s.RowsMatch || s.Failed > 0 {
				ok = false
				bad = append(bad, fmt.Sprintf("%.3gx: rows match %v, %d FAILED", s.Ratio, s.RowsMatch, s.Failed))
			}
		}
		got := fmt.Sprintf("%d steps, all fine", len(sw.Steps))
		if !ok {
			got = strings.Join(bad, "; ")
		}
		add("sweep: one row per 200 and no callback FAILED, every step", ok, "every step", got)
	}
	if r.Cost != nil {
		r.Checks = append(r.Checks, r.Cost.checks()...)
	}
	r.CorrectnessOK = true
	for _, c := range r.Checks {
		r.CorrectnessOK = r.CorrectnessOK && c.Met
	}
}

func (r *Report) targets() {
	r.Targets = nil
	add := func(t Target) { r.Targets = append(r.Targets, t) }
	skip := func(name, goal, why string) { add(Target{Name: name, Goal: goal, Measured: why, Skipped: true}) }
	base := r.Ratios.BaselinePerSecond

	// Worker drain.
	d1, dd := r.drainBatch1(), r.drainDefault()
	if dd == nil {
		skip("worker drain, default batch size, vs baseline", fmt.Sprintf(">= %.1fx", targetDrainRatio), "drain not run")
		skip("worker drain, default batch size, vs batch_size 1", fmt.Sprintf(">= %.0fx", targetDrainOverBatch1), "drain not run")
	} else {
		name := fmt.Sprintf("worker drain, batch size %d, vs baseline", dd.BatchSize)
		if base > 0 {
			add(Target{Name: name, Goal: fmt.Sprintf(">= %.1fx", targetDrainRatio),
				Measured: fmt.Sprintf("%.2fx (%.0f vs %.0f /s)", dd.RatioToBaseline, dd.PerSecond, base), Met: dd.PerSecond >= targetDrainRatio*base})
		} else {
			skip(name, fmt.Sprintf(">= %.1fx", targetDrainRatio), "no baseline")
		}
		over := r.Ratios.DrainDefaultOverBatch1
		add(Target{Name: fmt.Sprintf("worker drain, batch size %d, vs batch_size 1", dd.BatchSize), Goal: fmt.Sprintf(">= %.0fx", targetDrainOverBatch1),
			Measured: fmt.Sprintf("%.2fx (%.0f vs %.0f /s)", over, dd.PerSecond, d1.PerSecond), Met: d1.PerSecond > 0 && dd.PerSecond >= targetDrainOverBatch1*d1.PerSecond})
	}

	// Gateway and worker together.
	ol, e := r.OpenLoop, r.EndToEnd
	if ol != nil && e != nil {
		at := fmt.Sprintf("open loop %.2fx (%.0f/s) for %.0f s", ol.RateRatio, ol.Rate, ol.Measured.Seconds)
		add(Target{Name: at + ": intake p99", Goal: fmt.Sprintf("<= %d ms", p99LimitMs),
			Measured: fmt.Sprintf("%.1f ms (p50 %.1f, p99.9 %.1f ms, %d errors)", ol.Measured.Latency.P99, ol.Measured.Latency.P50, ol.Measured.Latency.P999, ol.Measured.Errors()+ol.Warmup.Errors()),
			Met:      ol.Measured.Latency.P99 <= p99LimitMs})
		m := fmt.Sprintf("PENDING %d -> %d over the window; last SUCCESS %.2f s after the last send", ol.PendingAtStart, ol.PendingAtEnd, e.DrainSeconds)
		if !e.Drained {
			m = fmt.Sprintf("PENDING %d -> %d over the window; NOT processed within %.0f s of the last send: %d PENDING, %d FAILED", ol.PendingAtStart, ol.PendingAtEnd, r.Settings.DrainTimeoutS, e.StillPending, e.Failed)
		}
		add(Target{Name: at + ": no backlog growth", Goal: fmt.Sprintf("<= %.0f s after the last send", drainLimit.Seconds()),
			Measured: m, Met: e.Drained && e.DrainSeconds <= drainLimit.Seconds()})
		lag := fmt.Sprintf("%.0f ms (p50 %.0f ms, n %d)", e.LagWindow.P99, e.LagWindow.P50, e.LagWindow.N)
		if e.LagWindowUnprocessed > 0 {
			lag += fmt.Sprintf(", %d of them unprocessed when read (counted with their lag then)", e.LagWindowUnprocessed)
		}
		add(Target{Name: at + ": processing lag p99", Goal: fmt.Sprintf("<= %.0f s", lagP99LimitMs/1000.0), Measured: lag,
			Met: e.LagWindow.N > 0 && e.LagWindow.P99 <= lagP99LimitMs})
	} else {
		why := "open loop not run"
		if ol != nil {
			why = "open loop ran without the worker"
		}
		skip("open loop: intake p99", fmt.Sprintf("<= %d ms", p99LimitMs), why)
		skip("open loop: no backlog growth", fmt.Sprintf("<= %.0f s after the last send", drainLimit.Seconds()), why)
		skip("open loop: processing lag p99", fmt.Sprintf("<= %.0f s", lagP99LimitMs/1000.0), why)
	}

	// Intake alone.
	if g := r.Group; g != nil {
		if base > 0 {
			add(Target{Name: "intake alone (group commit) vs baseline", Goal: fmt.Sprintf(">= %.1fx", targetIntakeRatio),
				Measured: fmt.Sprintf("%.2fx (%.0f vs %.0f /s)", g.RatioToBaseline, g.Measured.OKPerSecond, base), Met: g.Measured.OKPerSecond >= targetIntakeRatio*base})
		} else {
			skip("intake alone (group commit) vs baseline", fmt.Sprintf(">= %.1fx", targetIntakeRatio), "no baseline")
		}
		add(Target{Name: "intake alone p99", Goal: fmt.Sprintf("<= %d ms", p99LimitMs),
			Measured: fmt.Sprintf("%.1f ms (%d errors)", g.Measured.Latency.P99, g.Total.Errors()), Met: g.Measured.Latency.P99 <= p99LimitMs})
	} else {
		skip("intake alone (group commit) vs baseline", fmt.Sprintf(">= %.1fx", targetIntakeRatio), "group not run")
		skip("intake alone p99", fmt.Sprintf("<= %d ms", p99LimitMs), "group not run")
	}

	// CPU per processed callback: the worker alone, default batch size.
	for _, proc := range []string{"mariadbd", "worker"} {
		goal := fmt.Sprintf("<= %.1f ms", targetCPUPerCallbackMs)
		if dd == nil || dd.CPUPerCallback == nil {
			skip(proc+" CPU per processed callback", goal, "drain not run")
			continue
		}
		ms, ok := dd.CPUPerCallback[proc]
		if !ok {
			skip(proc+" CPU per processed callback", goal, "process not found")
			continue
		}
		add(Target{Name: fmt.Sprintf("%s CPU per processed callback (drain, batch size %d)", proc, dd.BatchSize), Goal: goal,
			Measured: fmt.Sprintf("%.3f ms", ms), Met: ms <= targetCPUPerCallbackMs})
	}

	r.AllTargetsMet = true
	for _, t := range r.Targets {
		r.AllTargetsMet = r.AllTargetsMet && (t.Met || t.Skipped)
	}
}

func writeJSON(path string, r any) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}
