package ingest

import (
	"context"
	"errors"
	"log/slog"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Announcer queues announcements for the workers without blocking.
type Announcer interface {
	Announce(an broker.Announcement) bool
}

var _ Announcer = (*broker.Announcer)(nil)

// AnnounceNew announces new callbacks, one announcement per kind with
// their ids in their order (the Batcher's hook after each group-commit
// batch, and OneByOne's after each row). An announcement the buffer cannot
// take is left to compensation.
func AnnounceNew(ann Announcer, log *slog.Logger) func([]store.Inserted) {
	return func(rows []store.Inserted) {
		ans := broker.Announcements(len(rows), func(i int) string { return rows[i].Kind }, func(i int) int64 { return rows[i].ID },
			func(i int) string { return tracing.TraceParentFromID(rows[i].TraceID) })
		for _, an := range ans {
			if !ann.Announce(an) {
				log.Warn("ingest: announce buffer full, left for compensation", "kind", an.Kind, "log_ids", len(an.LogIDs))
			}
		}
	}
}

// OneByOne stores without group commit: one INSERT per callback, announced
// on its own. Reconciliation stores this way; the intake does when
// mysql.group_commit is off (kept for comparison).
type OneByOne struct {
	Store *store.Store
	// Announce is told each new row (AnnounceNew); nil: nothing is
	// announced, compensation finds the rows.
	Announce func([]store.Inserted)
}

// InsertCallback implements Inserter.
func (o OneByOne) InsertCallback(ctx context.Context, l *callback.Log) (store.InsertResult, error) {
	res, err := o.Store.InsertCallback(ctx, l)
	// A row the primary alone holds is announced too: a retry of it is a
	// duplicate, never announced.
	if (err == nil || errors.Is(err, store.ErrNotReplicated)) && res.ID != 0 && !res.Duplicate && o.Announce != nil {
		o.Announce([]store.Inserted{{ID: res.ID, Kind: l.Kind, TraceID: l.TraceID}})
	}
	return res, err
}
