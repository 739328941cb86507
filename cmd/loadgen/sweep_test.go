package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func step(r float64, pass bool) SweepStep { return SweepStep{Ratio: r, Pass: pass} }

func bisected(r float64, pass bool) SweepStep { return SweepStep{Ratio: r, Pass: pass, Bisect: true} }

// The sweep climbs the plan until a step fails, bisects once between the
// last passing step (or 0) and the failing one, and reports the highest
// passing ratio.
func TestSweepNext(t *testing.T) {
	t.Parallel()
	plan := []float64{0.1, 0.2, 0.3, 0.4, 0.6, 0.8}
	type next struct {
		Ratio  float64
		Bisect bool
		OK     bool
	}
	for _, tc := range []struct {
		name    string
		steps   []SweepStep
		bisect  bool
		want    next
		best    float64
		atLeast bool
	}{
		{name: "first step", want: next{0.1, false, true}, bisect: true},
		{name: "climbs while passing", steps: []SweepStep{step(0.1, true), step(0.2, true)}, bisect: true,
			want: next{0.3, false, true}, best: 0.2, atLeast: true},
		{name: "bisects after the first failure", steps: []SweepStep{step(0.1, true), step(0.2, true), step(0.3, false)}, bisect: true,
			want: next{0.25, true, true}, best: 0.2},
		{name: "no bisection without -sweep-bisect", steps: []SweepStep{step(0.1, true), step(0.2, false)},
			want: next{}, best: 0.1},
		{name: "bisects once only", steps: []SweepStep{step(0.1, true), step(0.2, false), bisected(0.15, true)}, bisect: true,
			want: next{}, best: 0.15},
		{name: "a failing bisection leaves the last passing step", steps: []SweepStep{step(0.1, true), step(0.2, false), bisected(0.15, false)}, bisect: true,
			want: next{}, best: 0.1},
		{name: "first step fails: bisects towards 0", steps: []SweepStep{step(0.1, false)}, bisect: true,
			want: next{0.05, true, true}},
		{name: "every step passed", steps: []SweepStep{step(0.1, true), step(0.2, true), step(0.3, true), step(0.4, true), step(0.6, true), step(0.8, true)}, bisect: true,
			want: next{}, best: 0.8, atLeast: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got next
			got.Ratio, got.Bisect, got.OK = sweepNext(plan, tc.steps, tc.bisect)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("next step (-want +got):\n%s", diff)
			}
			best, atLeast := capacity(tc.steps)
			require.Equal(t, tc.best, best, "capacity")
			require.Equal(t, tc.atLeast, atLeast, "at least")
		})
	}
}

func TestSweepNextTooCloseToBisect(t *testing.T) {
	t.Parallel()
	_, _, ok := sweepNext([]float64{0.1, 0.11}, []SweepStep{step(0.1, true), step(0.11, false)}, true)
	require.False(t, ok, "halfway between 0.10 and 0.11 is not worth a step")
}

func TestSweepStepJudge(t *testing.T) {
	t.Parallel()
	good := SweepStep{P99Ms: 50, LagP99Ms: 2000, Drained: true, DrainSeconds: 5}
	for _, tc := range []struct {
		name string
		edit func(*SweepStep)
		why  string
	}{
		{name: "at the limits", edit: func(*SweepStep) {}},
		{name: "intake p99", edit: func(s *SweepStep) { s.P99Ms = 50.1 }, why: "intake p99 50.1 ms"},
		{name: "lag p99", edit: func(s *SweepStep) { s.LagP99Ms = 2001 }, why: "lag p99 2001 ms"},
		{name: "slow drain", edit: func(s *SweepStep) { s.DrainSeconds = 5.2 }, why: "not drained within 5s of the last send"},
		{name: "not drained", edit: func(s *SweepStep) { s.Drained = false }, why: "not drained within 5s of the last send"},
		{name: "errors and p99", edit: func(s *SweepStep) { s.Errors, s.P99Ms = 3, 80 }, why: "3 errors, intake p99 80.0 ms"},
	} {
		s := good
		tc.edit(&s)
		s.judge()
		require.Equal(t, tc.why == "", s.Pass, tc.name)
		require.Equal(t, tc.why, s.Why, tc.name)
	}
}

func TestParseRatios(t *testing.T) {
	t.Parallel()
	got, err := parseRatios(" 0.1, 0.2,0.35 ")
	require.NoError(t, err)
	require.Equal(t, []float64{0.1, 0.2, 0.35}, got)
	for _, bad := range []string{"", "0.2,0.1", "0.1,0.1", "x", "-0.1", "0"} {
		_, err := parseRatios(bad)
		require.Error(t, err, bad)
	}
}
