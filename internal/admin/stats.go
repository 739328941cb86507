package admin

import (
	"context"
	"time"

	"callgate/internal/store"
)

// Stats is the dashboard's view of the system.
type Stats struct {
	// Counts is status -> source -> count.
	Counts map[string]map[string]int64 `json:"counts"`
	// OldestPendingAge is the age of the oldest PENDING callback, seconds
	// (0 when none).
	OldestPendingAge float64 `json:"oldest_pending_age_seconds"`
	// FailedLastHour counts callbacks that went FAILED in the last hour.
	FailedLastHour int64 `json:"failed_last_hour"`
	// OutboxPending counts notifications not yet published.
	OutboxPending int64 `json:"outbox_pending"`
	// DownstreamUnrouted counts notifications waiting in
	// <prefix>.downstream.unrouted (published with a routing key no queue
	// was bound for); null when the broker cannot tell (unreachable).
	DownstreamUnrouted *int64 `json:"downstream_unrouted"`
	// DownstreamUnroutedLimit is the unrouted queue's bound in messages
	// (amqp.unrouted_max_length): at it RabbitMQ drops the oldest.
	// Absent when not known.
	DownstreamUnroutedLimit int64 `json:"downstream_unrouted_limit,omitempty"`
	// MySQLReplica, with mysql.durability: replica, is "acknowledging"
	// while a replica acknowledges the primary's commits, otherwise why
	// not (callbacks are then answered 503); absent with durability
	// primary.
	MySQLReplica *string `json:"mysql_replica,omitempty"`
	// Series is intake and failures per minute over the last hour.
	Series []Point `json:"series"`
	// DeadLettersDropped is, per source that had any, how many dead
	// letters (signed notifications its preset could not read, FAILED)
	// retention deleted after scheduler.retention.dead_letter_max_age,
	// and when it last did: the rows are gone, the count stays.
	DeadLettersDropped []store.DroppedDeadLetters `json:"dead_letters_dropped"`
}

// Point is one minute of the chart.
type Point struct {
	Minute   time.Time `json:"minute"`
	Received int64     `json:"received"`
	Failed   int64     `json:"failed"`
}

// ReplicaAcknowledging is Stats.MySQLReplica while a replica acknowledges
// the primary's commits.
const ReplicaAcknowledging = "acknowledging"

// unroutedTimeout bounds the broker's answer for the dashboard.
const unroutedTimeout = 2 * time.Second

// Stats reads the dashboard figures.
func (s *Service) Stats(ctx context.Context) (*Stats, error) {
	now := time.Now().UTC()
	unrouted := s.unrouted(ctx)
	counts, err := s.Store.CountsByStatus(ctx)
	if err != nil {
		return nil, err
	}
	st := &Stats{Counts: counts}
	oldest, err := s.Store.OldestPending(ctx)
	if err != nil {
		return nil, err
	}
	if oldest != nil {
		st.OldestPendingAge = now.Sub(*oldest).Seconds()
	}
	hourAgo := now.Add(-time.Hour)
	if st.FailedLastHour, err = s.Store.FailedSince(ctx, hourAgo); err != nil {
		return nil, err
	}
	ob, err := s.Store.OutboxBacklog(ctx)
	if err != nil {
		return nil, err
	}
	st.OutboxPending = ob.Pending
	if st.DeadLettersDropped, err = s.Store.DeadLettersDropped(ctx); err != nil {
		return nil, err
	}
	if st.DeadLettersDropped == nil {
		st.DeadLettersDropped = []store.DroppedDeadLetters{} // [] rather than null: none dropped
	}
	received, failed, err := s.Store.PerMinute(ctx, hourAgo)
	if err != nil {
		return nil, err
	}
	byMinute := map[time.Time]*Point{}
	start := now.Truncate(time.Minute).Add(-59 * time.Minute)
	for i := range 60 {
		m := start.Add(time.Duration(i) * time.Minute)
		st.Series = append(st.Series, Point{Minute: m})
	}
	for i := range st.Series {
		byMinute[st.Series[i].Minute] = &st.Series[i]
	}
	for m, n := range received {
		if p := byMinute[m]; p != nil {
			p.Received = n
		}
	}
	for m, n := range failed {
		if p := byMinute[m]; p != nil {
			p.Failed = n
		}
	}
	st.DownstreamUnrouted, st.DownstreamUnroutedLimit = <-unrouted, int64(s.UnroutedLimit)
	if s.Replica != nil {
		state := ReplicaAcknowledging
		if err := s.Replica(ctx); err != nil {
			state = err.Error()
		}
		st.MySQLReplica = &state
	}
	return st, nil
}

// unrouted asks the broker for the unrouted queue's depth while the
// database is read, and delivers nil (unknown) if the broker is away or
// slower than unroutedTimeout.
func (s *Service) unrouted(ctx context.Context) <-chan *int64 {
	out := make(chan *int64, 1)
	if s.Unrouted == nil {
		out <- nil
		return out
	}
	answer := make(chan *int64, 1)
	go func() {
		n, err := s.Unrouted()
		if err != nil {
			if s.Log != nil {
				s.Log.Debug("admin: unrouted notifications unknown", "error", err)
			}
			answer <- nil
			return
		}
		v := int64(n)
		answer <- &v
	}()
	go func() {
		t := time.NewTimer(unroutedTimeout)
		defer t.Stop()
		select {
		case v := <-answer:
			out <- v
		case <-t.C:
			out <- nil
		case <-ctx.Done():
			out <- nil
		}
	}()
	return out
}
