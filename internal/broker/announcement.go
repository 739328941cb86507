package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Announcement tells the workers of one kind that callbacks LogIDs wait.
// One announcement carries a group-commit batch (or a compensation run's,
// a wake-up's, a replay's ids) of one kind.
type Announcement struct {
	LogIDs []int64
	Kind   string
	// TraceParent continues the first callback's trace; the worker takes
	// each callback's own trace from its row.
	TraceParent string
}

// MaxAnnouncedIDs bounds the ids of one announcement (a group-commit
// batch is at most this big); callers with more split them.
const MaxAnnouncedIDs = 1000

// The wire format of an announcement, the one place it is written and
// read: a persistent JSON message on <prefix>.callbacks, routing key = kind,
// body {"log_ids":[N,...]}, the first callback's trace context in the
// traceparent header. The single-id body of earlier versions,
// {"log_id":N}, is still read, so messages queued before an upgrade are
// processed.
type announcementBody struct {
	LogIDs []int64 `json:"log_ids"`
	LogID  int64   `json:"log_id"`
}

// appendBody appends an's body to b.
func (an Announcement) appendBody(b []byte) []byte {
	b = append(b, `{"log_ids":[`...)
	for i, id := range an.LogIDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return append(b, "]}"...)
}

// ErrNotAnnouncement is a message body that is not an announcement.
var ErrNotAnnouncement = errors.New("not an announcement")

// ParseAnnouncement reads the log ids of an announcement's body, in either
// format.
func ParseAnnouncement(body []byte) ([]int64, error) {
	var b announcementBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAnnouncement, err)
	}
	ids := b.LogIDs
	if b.LogID > 0 {
		ids = append(ids, b.LogID)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no log id", ErrNotAnnouncement)
	}
	for _, id := range ids {
		if id <= 0 {
			return nil, fmt.Errorf("%w: log id %d", ErrNotAnnouncement, id)
		}
	}
	return ids, nil
}

// Announcements groups n callbacks into announcements: one per kind, in
// the order the kinds first appear, each with its callbacks' ids in order
// (split at MaxAnnouncedIDs) and the trace of its first callback. kind, id
// and trace read callback i.
func Announcements(n int, kind func(i int) string, id func(i int) int64, trace func(i int) string) []Announcement {
	byKind := map[string][]int{}
	var kinds []string
	for i := range n {
		k := kind(i)
		if byKind[k] == nil {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], i)
	}
	var out []Announcement
	for _, k := range kinds {
		idx := byKind[k]
		for start := 0; start < len(idx); start += MaxAnnouncedIDs {
			part := idx[start:min(start+MaxAnnouncedIDs, len(idx))]
			ids := make([]int64, len(part))
			for j, i := range part {
				ids[j] = id(i)
			}
			out = append(out, Announcement{LogIDs: ids, Kind: k, TraceParent: trace(part[0])})
		}
	}
	return out
}
