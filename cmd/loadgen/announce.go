package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// AnnounceCheck compares the log ids announced on <prefix>.payment with
// the log ids of the 200s, read once the gateway stopped (no worker runs
// in the intake phases, so every announcement is still queued).
type AnnounceCheck struct {
	// Messages read, by wire format: {"log_id":N} (one callback per
	// message) and {"log_ids":[...]} (one group-commit batch per message).
	Messages         int `json:"messages"`
	SingleIDMessages int `json:"single_id_messages"`
	BatchMessages    int `json:"batch_messages"`
	MaxIDsPerMessage int `json:"max_ids_per_message"`
	// Unreadable: messages that are no announcement.
	Unreadable  int `json:"unreadable"`
	DistinctIDs int `json:"distinct_ids"`
	// Missing: 200s whose log id no message carried. Duplicated: ids
	// carried more than once (harmless to the worker, but unexpected on a
	// quiet broker). Unexpected: ids no 200 answered.
	Missing    int `json:"missing"`
	Duplicated int `json:"duplicated"`
	Unexpected int `json:"unexpected"`
	// NoLogID: 200s whose answer carried no log id (a response template):
	// those cannot be checked.
	NoLogID       int     `json:"no_log_id"`
	MissingSample []int64 `json:"missing_sample,omitempty"`
	// CaughtUpSeconds: from the last 200 until the queue stopped growing
	// (how far the announcer was behind the intake); -1 if it never did.
	CaughtUpSeconds float64 `json:"caught_up_seconds"`
	// Match: the announced ids are exactly the accepted ones.
	Match bool `json:"match"`
}

// announcementBody is either wire format of an announcement.
type announcementBody struct {
	LogID  int64   `json:"log_id"`
	LogIDs []int64 `json:"log_ids"`
}

// parseAnnouncement returns the log ids of an announcement body in either
// format, and whether it was the batch format.
func parseAnnouncement(body []byte) (ids []int64, batch bool, err error) {
	var a announcementBody
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, false, fmt.Errorf("not an announcement: %w", err)
	}
	ids, batch = a.LogIDs, a.LogIDs != nil
	if a.LogID != 0 {
		ids = append(ids, a.LogID)
	}
	if len(ids) == 0 {
		return nil, batch, errors.New("not an announcement: no log id")
	}
	for _, id := range ids {
		if id <= 0 {
			return nil, batch, fmt.Errorf("not an announcement: log id %d", id)
		}
	}
	return ids, batch, nil
}

// compareIDs fills the set comparison of c from the accepted log ids (0:
// none answered) and how often each id was announced.
func (c *AnnounceCheck) compareIDs(accepted []int64, announced map[int64]int) {
	want := make(map[int64]bool, len(accepted))
	c.NoLogID, c.Missing, c.Duplicated, c.Unexpected, c.MissingSample = 0, 0, 0, 0, nil
	for _, id := range accepted {
		if id == 0 {
			c.NoLogID++
			continue
		}
		want[id] = true
	}
	for id := range want {
		if announced[id] == 0 {
			c.Missing++
			c.MissingSample = append(c.MissingSample, id)
		}
	}
	slices.Sort(c.MissingSample)
	c.MissingSample = c.MissingSample[:min(len(c.MissingSample), 10)]
	for id, n := range announced {
		if n > 1 {
			c.Duplicated++
		}
		if !want[id] {
			c.Unexpected++
		}
	}
	c.DistinctIDs = len(announced)
	c.Match = c.Missing == 0 && c.Unexpected == 0 && c.Unreadable == 0 && c.NoLogID == 0
}

// add counts one message and the ids it announces.
func (c *AnnounceCheck) add(body []byte, announced map[int64]int) {
	c.Messages++
	ids, batch, err := parseAnnouncement(body)
	if err != nil {
		c.Unreadable++
		return
	}
	if batch {
		c.BatchMessages++
	} else {
		c.SingleIDMessages++
	}
	c.MaxIDsPerMessage = max(c.MaxIDsPerMessage, len(ids))
	for _, id := range ids {
		announced[id]++
	}
}

// waitAnnouncer waits until <prefix>.payment stops growing (unchanged for
// half a second, no consumer on it) and returns when it last grew: the
// moment the announcer caught up with the intake. Zero if it did not stop
// growing within timeout.
func (b *bench) waitAnnouncer(ctx context.Context, timeout time.Duration) time.Time {
	const still = 500 * time.Millisecond
	deadline := time.Now().Add(timeout)
	last, changed := -1, time.Time{}
	for ctx.Err() == nil && time.Now().Before(deadline) {
		depth, _, err := b.queueDepth(b.queue())
		if err != nil {
			return time.Time{}
		}
		now := time.Now()
		if depth != last {
			last, changed = depth, now
		} else if now.Sub(changed) >= still {
			return changed
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}
}

// readAnnouncements consumes every message of <prefix>.payment (the queue
// is empty afterwards) and compares the announced log ids with accepted.
func (b *bench) readAnnouncements(ctx context.Context, accepted []int64) (*AnnounceCheck, error) {
	ch, err := b.amqp.Channel()
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	const tag = "callgate-loadgen-verify"
	deliveries, err := ch.ConsumeWithContext(ctx, b.queue(), tag, true, true, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("reading the announcements: %w", err)
	}
	c := &AnnounceCheck{}
	announced := make(map[int64]int, len(accepted))
	const idle = 300 * time.Millisecond
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case d, ok := <-deliveries:
			if !ok {
				return c, errors.New("reading the announcements: the channel closed")
			}
			c.add(d.Body, announced)
			timer.Reset(idle)
		case <-timer.C:
			// Quiet for a while: done when the broker has nothing left.
			depth, _, err := b.queueDepth(b.queue())
			if err != nil {
				return c, err
			}
			done = depth == 0
			timer.Reset(idle)
		}
	}
	_ = ch.Cancel(tag, false)
	c.compareIDs(accepted, announced)
	return c, nil
}
