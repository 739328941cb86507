package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// Both wire formats are read: the one-id body of today's gateway and the
// per-batch body of the batched intake.
func TestParseAnnouncement(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body    string
		ids     []int64
		batch   bool
		wantErr bool
	}{
		{body: `{"log_id":42}`, ids: []int64{42}},
		{body: `{"log_ids":[1,2,3]}`, ids: []int64{1, 2, 3}, batch: true},
		{body: `{"log_ids":[7]}`, ids: []int64{7}, batch: true},
		{body: `{"log_ids":[1,2],"log_id":3}`, ids: []int64{1, 2, 3}, batch: true},
		{body: `{"log_ids":[]}`, wantErr: true},
		{body: `{"log_id":0}`, wantErr: true},
		{body: `{"log_ids":[1,-2]}`, wantErr: true},
		{body: `{"other":1}`, wantErr: true},
		{body: `not json`, wantErr: true},
	} {
		ids, batch, err := parseAnnouncement([]byte(tc.body))
		if tc.wantErr {
			require.Error(t, err, tc.body)
			continue
		}
		require.NoError(t, err, tc.body)
		if diff := cmp.Diff(tc.ids, ids); diff != "" {
			t.Errorf("%s: ids (-want +got):\n%s", tc.body, diff)
		}
		require.Equal(t, tc.batch, batch, tc.body)
	}
}

func TestCompareIDs(t *testing.T) {
	t.Parallel()
	count := func(bodies ...string) (*AnnounceCheck, map[int64]int) {
		c, m := &AnnounceCheck{}, map[int64]int{}
		for _, b := range bodies {
			c.add([]byte(b), m)
		}
		return c, m
	}
	for _, tc := range []struct {
		name     string
		accepted []int64
		bodies   []string
		want     AnnounceCheck
	}{{
		name:     "one id per message",
		accepted: []int64{3, 1, 2},
		bodies:   []string{`{"log_id":1}`, `{"log_id":2}`, `{"log_id":3}`},
		want:     AnnounceCheck{Messages: 3, SingleIDMessages: 3, MaxIDsPerMessage: 1, DistinctIDs: 3, Match: true},
	}, {
		name:     "batches, and an old message",
		accepted: []int64{1, 2, 3, 4, 5},
		bodies:   []string{`{"log_ids":[1,2,3]}`, `{"log_ids":[4]}`, `{"log_id":5}`},
		want:     AnnounceCheck{Messages: 3, SingleIDMessages: 1, BatchMessages: 2, MaxIDsPerMessage: 3, DistinctIDs: 5, Match: true},
	}, {
		name:     "a duplicate is reported, the sets still match",
		accepted: []int64{1, 2},
		bodies:   []string{`{"log_ids":[1,2]}`, `{"log_ids":[2]}`},
		want:     AnnounceCheck{Messages: 2, BatchMessages: 2, MaxIDsPerMessage: 2, DistinctIDs: 2, Duplicated: 1, Match: true},
	}, {
		name:     "missing, unexpected and unreadable",
		accepted: []int64{1, 2, 3},
		bodies:   []string{`{"log_ids":[1,9]}`, `garbage`},
		want: AnnounceCheck{Messages: 2, BatchMessages: 1, Unreadable: 1, MaxIDsPerMessage: 2, DistinctIDs: 2,
			Missing: 2, MissingSample: []int64{2, 3}, Unexpected: 1},
	}, {
		name:     "a 200 without a log id cannot be checked",
		accepted: []int64{1, 0},
		bodies:   []string{`{"log_id":1}`},
		want:     AnnounceCheck{Messages: 1, SingleIDMessages: 1, MaxIDsPerMessage: 1, DistinctIDs: 1, NoLogID: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, m := count(tc.bodies...)
			c.compareIDs(tc.accepted, m)
			if diff := cmp.Diff(tc.want, *c); diff != "" {
				t.Errorf("check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body    string
		id      int64
		dup, ok bool
	}{
		{body: `{"status":"accepted","log_id":1234,"duplicate":false}`, id: 1234, ok: true},
		{body: `{"status":"accepted","log_id":7,"duplicate":true}`, id: 7, dup: true, ok: true},
		{body: `{"duplicate":false}`, ok: true}, // a response template without the id
		{body: `{"status":"accepted","log_id":5}`},
		{body: `<html>`},
	} {
		id, dup, ok := parseAccepted([]byte(tc.body))
		require.Equal(t, []any{tc.id, tc.dup, tc.ok}, []any{id, dup, ok}, tc.body)
	}
}
