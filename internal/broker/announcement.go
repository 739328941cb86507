package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Announcement tells the workers of one kind that callback LogID waits.
type Announcement struct {
	LogID       int64
	Kind        string
	TraceParent string
}

// The wire format of an announcement, the one place it is written and
// read: a persistent JSON message on <prefix>.callbacks, routing key = kind,
// body {"log_id":N}, the callback's trace context in the traceparent
// header.
type announcementBody struct {
	LogID int64 `json:"log_id"`
}

// appendBody appends an's body to b.
func (an Announcement) appendBody(b []byte) []byte {
	b = append(b, `{"log_id":`...)
	b = strconv.AppendInt(b, an.LogID, 10)
	return append(b, '}')
}

// ErrNotAnnouncement is a message body that is not an announcement.
var ErrNotAnnouncement = errors.New("not an announcement")

// ParseAnnouncement reads the log id of an announcement's body.
func ParseAnnouncement(body []byte) (int64, error) {
	var b announcementBody
	if err := json.Unmarshal(body, &b); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotAnnouncement, err)
	}
	if b.LogID <= 0 {
		return 0, fmt.Errorf("%w: no log id", ErrNotAnnouncement)
	}
	return b.LogID, nil
}
