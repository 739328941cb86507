package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// A run meeting every target of issue 12 but the drain's CPU split: the
// targets are the issue's, in its order, each judged on the right phase.
func TestEvaluateTargets(t *testing.T) {
	t.Parallel()
	measured := func(okPerSecond, p99 float64) WindowStats {
		return WindowStats{OKPerSecond: okPerSecond, Seconds: 60, Latency: Latency{N: 100, P99: p99}}
	}
	r := &Report{
		Baseline: &ClosedPhase{Measured: measured(8000, 20), Verify: Verify{Accepted: 10, RowsInDB: 10, RowsMatch: true}},
		Group: &ClosedPhase{Measured: measured(8100, 30), Verify: Verify{Accepted: 5, RowsInDB: 5, RowsMatch: true,
			Announced: &AnnounceCheck{DistinctIDs: 5, Match: true}}},
		Drains: []*Drain{
			{BatchSize: 1, PerSecond: 500, RatioToBaseline: 0.06, Backlog: 10, Succeeded: 10, Drained: true, OutboxRows: 20, OutboxSent: 20,
				Verify: Verify{RowsMatch: true}},
			{BatchSize: 64, PerSecond: 2500, RatioToBaseline: 0.31, Backlog: 10, Succeeded: 10, Drained: true, OutboxRows: 20, OutboxSent: 20,
				Verify: Verify{RowsMatch: true}, CPUPerCallback: map[string]float64{"worker": 0.25, "mariadbd": 0.35}},
		},
		OpenLoop: &OpenLoop{Rate: 1600, RateRatio: 0.2, Worker: true, Measured: measured(1600, 45), Verify: Verify{RowsMatch: true}},
		EndToEnd: &EndToEnd{Drained: true, DrainSeconds: 1.5, LagWindow: Latency{N: 96000, P50: 300, P99: 1900}, Succeeded: 3, OutboxRows: 6, OutboxSent: 6},
	}
	r.evaluate()

	type verdict struct {
		Name string
		Met  bool
	}
	var got []verdict
	for _, tg := range r.Targets {
		require.False(t, tg.Skipped, tg.Name)
		got = append(got, verdict{tg.Name, tg.Met})
	}
	want := []verdict{
		{"worker drain, batch size 64, vs baseline", true},
		{"worker drain, batch size 64, vs batch_size 1", true},
		{"open loop 0.20x (1600/s) for 60 s: intake p99", true},
		{"open loop 0.20x (1600/s) for 60 s: no backlog growth", true},
		{"open loop 0.20x (1600/s) for 60 s: processing lag p99", true},
		{"intake alone (group commit) vs baseline", true},
		{"intake alone p99", true},
		{"mariadbd CPU per processed callback (drain, batch size 64)", false},
		{"worker CPU per processed callback (drain, batch size 64)", true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	require.False(t, r.AllTargetsMet)
	require.True(t, r.CorrectnessOK, "%+v", r.Checks)
	require.Equal(t, Ratios{BaselinePerSecond: 8000, Group: 1.01, DrainBatch1: 0.06, DrainDefault: 0.31, DrainDefaultOverBatch1: 5, OpenRate: 0.2}, r.Ratios)
}

// A ratio just under a target misses it even when it rounds to it.
func TestEvaluateRoundingDoesNotMeet(t *testing.T) {
	t.Parallel()
	r := &Report{
		Baseline: &ClosedPhase{Measured: WindowStats{OKPerSecond: 10000}},
		Group:    &ClosedPhase{Measured: WindowStats{OKPerSecond: 9980}},
		Drains:   []*Drain{{BatchSize: 1, PerSecond: 1000}, {BatchSize: 64, PerSecond: 2990, RatioToBaseline: ratio(2990, 10000)}},
	}
	r.evaluate()
	for _, tg := range r.Targets[:2] {
		require.False(t, tg.Met, tg.Name+": "+tg.Measured)
	}
	for _, tg := range r.Targets {
		if tg.Name == "intake alone (group commit) vs baseline" {
			require.False(t, tg.Met, tg.Measured)
			require.Contains(t, tg.Measured, "1.00x")
		}
	}
}

// A backlog not worked off within 5 s of the last send is growth, and an
// announced-id mismatch fails the run's correctness.
func TestEvaluateMisses(t *testing.T) {
	t.Parallel()
	r := &Report{
		Group: &ClosedPhase{Verify: Verify{RowsMatch: true, Announced: &AnnounceCheck{Missing: 1}}},
		OpenLoop: &OpenLoop{Rate: 1600, RateRatio: 0.2, Worker: true, PendingAtStart: 10, PendingAtEnd: 9000,
			Measured: WindowStats{Seconds: 60, Latency: Latency{N: 1, P99: 10}}, Verify: Verify{RowsMatch: true}},
		EndToEnd: &EndToEnd{Drained: false, StillPending: 5000, LagWindow: Latency{N: 10, P99: 25000}},
	}
	r.evaluate()
	met := map[string]bool{}
	for _, tg := range r.Targets {
		met[tg.Name] = tg.Met
	}
	require.False(t, met["open loop 0.20x (1600/s) for 60 s: no backlog growth"])
	require.False(t, met["open loop 0.20x (1600/s) for 60 s: processing lag p99"])
	require.True(t, met["open loop 0.20x (1600/s) for 60 s: intake p99"])
	require.False(t, r.CorrectnessOK)
}
