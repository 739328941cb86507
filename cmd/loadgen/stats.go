package main

import (
	"math"
	"slices"
	"time"
)

// Latency summarizes a set of durations, in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

// summarize sorts ds in place.
func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	ms := func(d time.Duration) float64 { return round(float64(d)/1e6, 2) }
	return Latency{
		N:    len(ds),
		Mean: round(sum/float64(len(ds))/1e6, 2),
		P50:  ms(quantile(ds, 0.50)),
		P95:  ms(quantile(ds, 0.95)),
		P99:  ms(quantile(ds, 0.99)),
		P999: ms(quantile(ds, 0.999)),
		Max:  ms(ds[len(ds)-1]),
	}
}

// quantile is the nearest-rank quantile of sorted ds.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func round(v float64, digits int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 2)
}
