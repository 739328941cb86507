package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sweep is the capacity sweep: open-loop steps at rising rates (ratios of
// the baseline), gateway and worker running, each step on an empty
// backlog; it stops at the first failing step and may bisect once.
type Sweep struct {
	What  string      `json:"what"`
	Steps []SweepStep `json:"steps"`
	// Capacity: the highest passing rate (0: no step passed). AtLeast: no
	// step failed, so the capacity may be higher than the last one tried.
	CapacityRatio float64 `json:"capacity_ratio_to_baseline"`
	CapacityRate  float64 `json:"capacity_per_second"`
	AtLeast       bool    `json:"capacity_at_least"`
}

// SweepStep is one open-loop step of the sweep.
type SweepStep struct {
	Ratio  float64 `json:"ratio_to_baseline"`
	Rate   float64 `json:"rate"`
	Bisect bool    `json:"bisect"`
	// Intake: accepted/s and latency from the scheduled send time over the
	// measured window, errors over the whole step.
	OKPerSecond float64 `json:"ok_per_second"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Errors      int     `json:"errors"`
	// Processing lag of the callbacks received in the window (those still
	// unprocessed when it was read count with their lag then).
	LagP50Ms       float64 `json:"lag_p50_ms"`
	LagP99Ms       float64 `json:"lag_p99_ms"`
	LagUnprocessed int     `json:"lag_unprocessed"`
	// Drained: every callback SUCCESS within the wait after the last send;
	// DrainSeconds: last send to last SUCCESS.
	Drained            bool               `json:"drained"`
	DrainSeconds       float64            `json:"drain_seconds"`
	PendingAtStart     int                `json:"pending_at_window_start"`
	PendingAtEnd       int                `json:"pending_at_window_end"`
	ProcessedPerSecond float64            `json:"processed_per_second"`
	MachineBusyPct     float64            `json:"machine_busy_pct"`
	CPUPerProcessed    map[string]float64 `json:"cpu_ms_per_processed_callback,omitempty"`
	// Correctness: one row per 200, none FAILED.
	RowsMatch bool   `json:"rows_match"`
	Failed    int    `json:"failed"`
	Pass      bool   `json:"pass"`
	Why       string `json:"why,omitempty"`
}

// The capacity criteria (the issue's): intake p99, processing lag p99, and
// every callback processed within drainLimit of the last send.
const (
	p99LimitMs    = 50
	lagP99LimitMs = 2000
	drainLimit    = 5 * time.Second
)

// judge sets Pass and Why.
func (s *SweepStep) judge() {
	var why []string
	if s.Errors > 0 {
		why = append(why, fmt.Sprintf("%d errors", s.Errors))
	}
	if s.P99Ms > p99LimitMs {
		why = append(why, fmt.Sprintf("intake p99 %.1f ms", s.P99Ms))
	}
	if s.LagP99Ms > lagP99LimitMs {
		why = append(why, fmt.Sprintf("lag p99 %.0f ms", s.LagP99Ms))
	}
	if !s.Drained || s.DrainSeconds > drainLimit.Seconds() {
		why = append(why, fmt.Sprintf("not drained within %s of the last send", drainLimit))
	}
	s.Pass, s.Why = len(why) == 0, strings.Join(why, ", ")
}

// sweepNext returns the next ratio to try after steps: the plan's ratios in
// order until one fails, then (with bisect) once halfway between the last
// passing ratio (or 0) and the failing one. ok is false when the sweep is
// over.
func sweepNext(plan []float64, steps []SweepStep, bisect bool) (next float64, isBisect, ok bool) {
	var lastPass, firstFail float64
	for _, s := range steps {
		switch {
		case s.Bisect:
			return 0, false, false
		case s.Pass:
			lastPass = max(lastPass, s.Ratio)
		default:
			firstFail = s.Ratio
		}
	}
	if firstFail == 0 {
		if len(steps) < len(plan) {
			return plan[len(steps)], false, true
		}
		return 0, false, false
	}
	mid := round((lastPass+firstFail)/2, 3)
	if !bisect || mid-lastPass < 0.01 {
		return 0, false, false
	}
	return mid, true, true
}

// capacity is the highest passing ratio, and whether no step failed.
func capacity(steps []SweepStep) (best float64, atLeast bool) {
	atLeast = len(steps) > 0
	for _, s := range steps {
		if s.Pass {
			best = max(best, s.Ratio)
		} else {
			atLeast = false
		}
	}
	return best, atLeast
}

// parseRatios reads "0.1,0.2,...": positive, rising.
func parseRatios(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		if len(out) > 0 && r <= out[len(out)-1] {
			return nil, fmt.Errorf("ratios must rise: %v after %v", r, out[len(out)-1])
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("no ratio")
	}
	return out, nil
}

// sweep runs the capacity sweep.
func (b *bench) sweep(ctx context.Context) (*Sweep, error) {
	sw := &Sweep{What: fmt.Sprintf("open loop, gateway and worker (batch size %d) running, %s warm-up + %s per step, each on an empty backlog; pass = 0 errors, intake p99 <= %d ms, processing lag p99 <= %d ms, every callback processed within %s of the last send",
		b.batchSize, b.o.sweepWarmup, b.o.sweepStep, p99LimitMs, lagP99LimitMs, drainLimit)}
	if b.baselineRate <= 0 {
		return sw, errors.New("sweep: no baseline rate to take ratios of")
	}
	for ctx.Err() == nil {
		r, bisect, ok := sweepNext(b.o.sweepRatios, sw.Steps, b.o.sweepBisect)
		if !ok {
			break
		}
		st, err := b.sweepStep(ctx, len(sw.Steps), r, bisect)
		sw.Steps = append(sw.Steps, st)
		if err != nil {
			return sw, err
		}
	}
	sw.CapacityRatio, sw.AtLeast = capacity(sw.Steps)
	sw.CapacityRate = round(sw.CapacityRatio*b.baselineRate, 0)
	return sw, ctx.Err()
}

func (b *bench) sweepStep(ctx context.Context, i int, r float64, bisect bool) (SweepStep, error) {
	st := SweepStep{Ratio: r, Rate: round(r*b.baselineRate, 0), Bisect: bisect}
	ol, e2e, err := b.openRun(ctx, openSpec{name: fmt.Sprintf("sweep-%d", i+1), tag: fmt.Sprintf("sw%d", i+1), rate: st.Rate,
		warmup: b.o.sweepWarmup, duration: b.o.sweepStep, worker: true, drainWait: drainLimit})
	if err != nil {
		return st, err
	}
	st.OKPerSecond = ol.Measured.OKPerSecond
	st.P50Ms, st.P99Ms = ol.Measured.Latency.P50, ol.Measured.Latency.P99
	st.Errors = ol.Warmup.Errors() + ol.Measured.Errors()
	st.LagP50Ms, st.LagP99Ms, st.LagUnprocessed = e2e.LagWindow.P50, e2e.LagWindow.P99, e2e.LagWindowUnprocessed
	st.Drained, st.DrainSeconds = e2e.Drained, e2e.DrainSeconds
	st.PendingAtStart, st.PendingAtEnd = ol.PendingAtStart, ol.PendingAtEnd
	st.ProcessedPerSecond = ol.ProcessedPerSecond
	st.MachineBusyPct = ol.Resources.MachineBusy.CPUPercent
	st.CPUPerProcessed = ol.CPUPerProcessed
	st.RowsMatch, st.Failed = ol.Verify.RowsMatch, e2e.Failed
	st.judge()
	verdict := "pass"
	if !st.Pass {
		verdict = "FAIL: " + st.Why
	}
	b.logf("sweep step %.3gx = %.0f/s: p99 %.1f ms, lag p99 %.0f ms, drained %v (%.2fs after the last send): %s",
		r, st.Rate, st.P99Ms, st.LagP99Ms, st.Drained, st.DrainSeconds, verdict)
	return st, nil
}

// sortedSteps lists the steps by ratio, lowest first (the bisection step
// among them, for the report).
func (sw *Sweep) sortedSteps() []SweepStep {
	out := slices.Clone(sw.Steps)
	slices.SortStableFunc(out, func(a, b SweepStep) int { return cmp.Compare(a.Ratio, b.Ratio) })
	return out
}
