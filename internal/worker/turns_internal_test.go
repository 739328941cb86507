package worker

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"callgate/internal/store"
)

// TestTurnsOf: of a key's callbacks in a batch, those run now that nothing
// before them in the key's line holds up: a PENDING callback elsewhere (or
// left out) holds up every later one, one that awaits what it depends on
// only the later awaiting ones.
func TestTurnsOf(t *testing.T) {
	p := func(id int64) store.Pending { return store.Pending{ID: id} }
	a := func(id int64) store.Pending { return store.Pending{ID: id, Awaiting: true} }
	for _, c := range []struct {
		name  string
		batch []int64
		line  []store.Pending
		want  []int64
	}{
		{"the whole line", []int64{1, 2, 3}, []store.Pending{p(1), p(2), p(3)}, []int64{1, 2, 3}},
		{"an earlier one elsewhere", []int64{2, 3}, []store.Pending{p(1), p(2), p(3)}, nil},
		{"a gap", []int64{1, 3}, []store.Pending{p(1), p(2), p(3)}, []int64{1}},
		{"an earlier awaiting one elsewhere", []int64{2, 3}, []store.Pending{a(1), p(2), p(3)}, []int64{2, 3}},
		{"awaiting ones keep their order", []int64{2, 3}, []store.Pending{a(1), a(2), p(3)}, []int64{3}},
		{"an awaiting one in the batch", []int64{1, 2}, []store.Pending{a(1), a(2)}, []int64{1, 2}},
		{"a gap of an awaiting one", []int64{3}, []store.Pending{p(1), a(2), p(3)}, nil},
	} {
		if d := cmp.Diff(c.want, turnsOf(c.batch, c.line)); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
}
