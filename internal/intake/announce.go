package intake

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

// AnnounceNew announces the new callbacks of a group-commit batch, one
// announcement per kind with the batch's ids in their order (the Batcher's
// hook). An announcement the buffer cannot take is left to compensation.
func AnnounceNew(ann Announcer, log *slog.Logger) func([]store.Inserted) {
	return func(rows []store.Inserted) {
		ans := broker.Announcements(len(rows), func(i int) string { return rows[i].Kind }, func(i int) int64 { return rows[i].ID },
			func(i int) string { return tracing.TraceParentFromID(rows[i].TraceID) })
		for _, an := range ans {
			if !ann.Announce(an) {
				log.Warn("intake: announce buffer full, left for compensation", "kind", an.Kind, "log_ids", len(an.LogIDs))
			}
		}
	}
}

// OneByOne is the intake without group commit: one INSERT per request,
// announced on its own (kept for comparison; see mysql.group_commit).
type OneByOne struct {
	Store    *store.Store
	Announce func([]store.Inserted)
}

var _ Inserter = OneByOne{}

// InsertCallback implements Inserter.
func (o OneByOne) InsertCallback(ctx context.Context, l *callback.Log) (store.InsertResult, error) {
	res, err := o.Store.InsertCallback(ctx, l)
	// A row the primary alone holds (503) is announced too: the retry is a
	// duplicate, never announced.
	if (err == nil || errors.Is(err, store.ErrNotReplicated)) && res.ID != 0 && !res.Duplicate {
		o.Announce([]store.Inserted{{ID: res.ID, Kind: l.Kind, TraceID: l.TraceID}})
	}
	return res, err
}
