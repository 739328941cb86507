package admin

import (
	"context"
	"fmt"
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
	// Series is intake and failures per minute over the last hour.
	Series []Point `json:"series"`
}

// Point is one minute of the chart.
type Point struct {
	Minute   time.Time `json:"minute"`
	Received int64     `json:"received"`
	Failed   int64     `json:"failed"`
}

// unroutedTimeout bounds the broker's answer for the dashboard.
const unroutedTimeout = 2 * time.Second

// Stats reads the dashboard figures.
func (s *Service) Stats(ctx context.Context) (*Stats, error) {
	db := s.DB.WithContext(ctx)
	now := time.Now().UTC()
	st := &Stats{Counts: map[string]map[string]int64{}}
	unrouted := s.unrouted(ctx)
	var counts []struct {
		Status string
		Source string
		N      int64
	}
	if err := db.Raw(`SELECT status, source, COUNT(*) AS n FROM callback_log GROUP BY status, source`).Scan(&counts).Error; err != nil {
		return nil, fmt.Errorf("error counting callbacks: %w", store.Translate(err))
	}
	for _, c := range counts {
		if st.Counts[c.Status] == nil {
			st.Counts[c.Status] = map[string]int64{}
		}
		st.Counts[c.Status][c.Source] = c.N
	}
	var oldest struct{ Oldest *time.Time }
	if err := db.Raw(`SELECT MIN(received_at) AS oldest FROM callback_log WHERE status = 'PENDING'`).Scan(&oldest).Error; err != nil {
		return nil, fmt.Errorf("error reading backlog age: %w", store.Translate(err))
	}
	if oldest.Oldest != nil {
		st.OldestPendingAge = now.Sub(*oldest.Oldest).Seconds()
	}
	hourAgo := now.Add(-time.Hour)
	if err := db.Raw(`SELECT COUNT(*) FROM callback_log WHERE status = 'FAILED' AND processed_at >= ?`, hourAgo).Scan(&st.FailedLastHour).Error; err != nil {
		return nil, fmt.Errorf("error counting recent failures: %w", store.Translate(err))
	}
	if err := db.Raw(`SELECT COUNT(*) FROM outbox WHERE status = 'PENDING'`).Scan(&st.OutboxPending).Error; err != nil {
		return nil, fmt.Errorf("error counting outbox: %w", store.Translate(err))
	}
	var received, failed []struct {
		M time.Time
		N int64
	}
	minute := `DATE_FORMAT(%s, '%%Y-%%m-%%d %%H:%%i:00')`
	if err := db.Raw(fmt.Sprintf(`SELECT CAST(%s AS DATETIME) AS m, COUNT(*) AS n FROM callback_log WHERE received_at >= ? GROUP BY m`,
		fmt.Sprintf(minute, "received_at")), hourAgo).Scan(&received).Error; err != nil {
		return nil, fmt.Errorf("error reading intake series: %w", store.Translate(err))
	}
	if err := db.Raw(fmt.Sprintf(`SELECT CAST(%s AS DATETIME) AS m, COUNT(*) AS n FROM callback_log WHERE status = 'FAILED' AND processed_at >= ? GROUP BY m`,
		fmt.Sprintf(minute, "processed_at")), hourAgo).Scan(&failed).Error; err != nil {
		return nil, fmt.Errorf("error reading failure series: %w", store.Translate(err))
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
	for _, r := range received {
		if p := byMinute[r.M.UTC()]; p != nil {
			p.Received = r.N
		}
	}
	for _, f := range failed {
		if p := byMinute[f.M.UTC()]; p != nil {
			p.Failed = f.N
		}
	}
	st.DownstreamUnrouted = <-unrouted
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
