package store

import "testing"

// TestSemiSyncCovers: the readings around an intake write accept it only
// when a replica acknowledged that commit. Each row changes one thing from
// a pair that covers, so removing any condition of covers fails a row.
func TestSemiSyncCovers(t *testing.T) {
	t.Parallel()
	before := semiSync{on: true, noTx: 5, yesTx: 100, noTimes: 2, clients: 1}
	after := semiSync{on: true, noTx: 5, yesTx: 101, noTimes: 2, clients: 1}
	if !before.covers(after) {
		t.Fatal("an acknowledged commit between two healthy readings is covered")
	}
	for _, tc := range []struct {
		why           string
		before, after func(*semiSync)
	}{
		{"semi-sync off before", func(r *semiSync) { r.on = false }, nil},
		{"semi-sync off after", nil, func(r *semiSync) { r.on = false }},
		{"no replica connected before (status ON right after enabling)", func(r *semiSync) { r.clients = 0 }, nil},
		{"no replica connected after", nil, func(r *semiSync) { r.clients = 0 }},
		{"a commit went unacknowledged", nil, func(r *semiSync) { r.noTx++ }},
		{"semi-sync was switched off and on meanwhile", nil, func(r *semiSync) { r.noTimes++ }},
		{"no commit was acknowledged (rpl_semi_sync_master_enabled was OFF)", nil, func(r *semiSync) { r.yesTx = 100 }},
	} {
		b, a := before, after
		if tc.before != nil {
			tc.before(&b)
		}
		if tc.after != nil {
			tc.after(&a)
		}
		if b.covers(a) {
			t.Errorf("%s: covered, want not", tc.why)
		}
	}
}
