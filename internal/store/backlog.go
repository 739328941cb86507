package store

import (
	"context"
	"fmt"
	"time"

	"callgate/internal/callback"
)

// Backlog figures, read by the worker's gauges and the console's dashboard.

// SourceBacklog is where one source's callbacks stand.
type SourceBacklog struct {
	Pending int64
	// OldestPending is when the oldest PENDING callback was received (nil
	// when none is PENDING).
	OldestPending *time.Time
	Failed        int64
}

// SourceBacklog reads one source's backlog on the (source, status, id)
// index: counting reads index entries only, and the oldest PENDING is the
// lowest id.
func (s *Store) SourceBacklog(ctx context.Context, source string) (SourceBacklog, error) {
	var b SourceBacklog
	var first struct {
		N     int64
		MinID *int64
	}
	db := s.q(ctx, nil)
	if err := db.Raw(`SELECT COUNT(*) AS n, MIN(id) AS min_id FROM callback_log WHERE source = ? AND status = ?`,
		source, callback.StatusPending).Scan(&first).Error; err != nil {
		return b, fmt.Errorf("error reading the backlog of %s: %w", source, translate(err))
	}
	b.Pending = first.N
	if first.MinID != nil {
		var oldest struct{ ReceivedAt *time.Time }
		if err := db.Raw(`SELECT received_at FROM callback_log WHERE id = ?`, *first.MinID).Scan(&oldest).Error; err != nil {
			return b, fmt.Errorf("error reading the backlog age of %s: %w", source, translate(err))
		}
		b.OldestPending = oldest.ReceivedAt
	}
	if err := db.Raw(`SELECT COUNT(*) FROM callback_log WHERE source = ? AND status = ?`, source, callback.StatusFailed).
		Scan(&b.Failed).Error; err != nil {
		return b, fmt.Errorf("error counting the FAILED callbacks of %s: %w", source, translate(err))
	}
	return b, nil
}

// OldestPending is when the oldest PENDING callback of any source was
// received (nil when none is PENDING), on the (status, id) index.
func (s *Store) OldestPending(ctx context.Context) (*time.Time, error) {
	var oldest []time.Time
	if err := s.q(ctx, nil).Raw(`SELECT received_at FROM callback_log WHERE status = ? ORDER BY id LIMIT 1`,
		callback.StatusPending).Scan(&oldest).Error; err != nil {
		return nil, fmt.Errorf("error reading the backlog age: %w", translate(err))
	}
	if len(oldest) == 0 {
		return nil, nil
	}
	return &oldest[0], nil
}

// OutboxBacklog is the notifications not yet published.
type OutboxBacklog struct {
	Pending int64
	// Oldest is the oldest PENDING row's created_at (nil when none).
	Oldest *time.Time
}

// OutboxBacklog reads the outbox's backlog.
func (s *Store) OutboxBacklog(ctx context.Context) (OutboxBacklog, error) {
	var ob struct {
		N      int64
		Oldest *time.Time
	}
	if err := s.q(ctx, nil).Raw(`SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox WHERE status = ?`, OutboxPending).
		Scan(&ob).Error; err != nil {
		return OutboxBacklog{}, fmt.Errorf("error reading the outbox backlog: %w", translate(err))
	}
	return OutboxBacklog{Pending: ob.N, Oldest: ob.Oldest}, nil
}

// CountsByStatus returns status -> source -> callbacks.
func (s *Store) CountsByStatus(ctx context.Context) (map[string]map[string]int64, error) {
	var counts []struct {
		Status string
		Source string
		N      int64
	}
	if err := s.q(ctx, nil).Raw(`SELECT status, source, COUNT(*) AS n FROM callback_log GROUP BY status, source`).Scan(&counts).Error; err != nil {
		return nil, fmt.Errorf("error counting callbacks: %w", translate(err))
	}
	out := map[string]map[string]int64{}
	for _, c := range counts {
		if out[c.Status] == nil {
			out[c.Status] = map[string]int64{}
		}
		out[c.Status][c.Source] = c.N
	}
	return out, nil
}

// FailedSince counts the callbacks that went FAILED at or after since.
func (s *Store) FailedSince(ctx context.Context, since time.Time) (int64, error) {
	var n int64
	if err := s.q(ctx, nil).Raw(`SELECT COUNT(*) FROM callback_log WHERE status = ? AND processed_at >= ?`,
		callback.StatusFailed, since).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("error counting recent failures: %w", translate(err))
	}
	return n, nil
}

// PerMinute returns, by UTC minute since since, the callbacks received and
// those that went FAILED.
func (s *Store) PerMinute(ctx context.Context, since time.Time) (received, failed map[time.Time]int64, err error) {
	scan := func(query string, args ...any) (map[time.Time]int64, error) {
		var rows []struct {
			M time.Time
			N int64
		}
		if err := s.q(ctx, nil).Raw(query, args...).Scan(&rows).Error; err != nil {
			return nil, err
		}
		out := make(map[time.Time]int64, len(rows))
		for _, r := range rows {
			out[r.M.UTC()] = r.N
		}
		return out, nil
	}
	received, err = scan(`SELECT CAST(DATE_FORMAT(received_at, '%Y-%m-%d %H:%i:00') AS DATETIME) AS m, COUNT(*) AS n
		FROM callback_log WHERE received_at >= ? GROUP BY m`, since)
	if err != nil {
		return nil, nil, fmt.Errorf("error reading the intake series: %w", translate(err))
	}
	failed, err = scan(`SELECT CAST(DATE_FORMAT(processed_at, '%Y-%m-%d %H:%i:00') AS DATETIME) AS m, COUNT(*) AS n
		FROM callback_log WHERE status = ? AND processed_at >= ? GROUP BY m`, callback.StatusFailed, since)
	if err != nil {
		return nil, nil, fmt.Errorf("error reading the failure series: %w", translate(err))
	}
	return received, failed, nil
}
