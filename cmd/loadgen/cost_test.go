package main

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// The cost phase's figures count only when every callback was accepted,
// stored, processed and its notifications confirmed: the report's
// correctness says so.
func TestCostChecks(t *testing.T) {
	t.Parallel()
	clean := Cost{Callbacks: 10, Accepted: 10, RowsInDB: 10, Succeeded: 10, OutboxRows: 20, OutboxSent: 20, Done: true}
	for _, tc := range []struct {
		name string
		edit func(c *Cost)
		ok   bool
	}{
		{"every callback accepted, processed and notified", func(*Cost) {}, true},
		{"a 503 stored all the same", func(c *Cost) { c.Accepted, c.Errors = 9, 1 }, false},
		{"a notification not SENT", func(c *Cost) { c.OutboxSent = 19 }, false},
		{"a callback still PENDING", func(c *Cost) { c.Succeeded, c.Pending = 9, 1 }, false},
		{"not settled before the deadline", func(c *Cost) { c.Done = false }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := clean
			tc.edit(&c)
			r := &Report{Cost: &c}
			require.True(t, r.ran())
			r.evaluate()
			require.Equal(t, tc.ok, r.CorrectnessOK, "%+v", r.Checks)
		})
	}
}

// The worker's batches are read from its callgate_batch_size histogram.
func TestHistogram(t *testing.T) {
	t.Parallel()
	const exposition = `# TYPE callgate_batch_size histogram
callgate_batch_size_bucket{le="64"} 3
callgate_batch_size_bucket{le="+Inf"} 3
callgate_batch_size_sum 150
callgate_batch_size_count 3
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(exposition))
	require.NoError(t, err)
	count, sum := histogram(metricsText(fams), "callgate_batch_size")
	require.Equal(t, []float64{3, 150}, []float64{count, sum})
	count, sum = histogram(metricsText(fams), "callgate_absent")
	require.Equal(t, []float64{0, 0}, []float64{count, sum})
}
