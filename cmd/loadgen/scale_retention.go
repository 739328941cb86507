package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"callgate/internal/store"
)

// Retention is make bench-scale's retention phase, on the loaded tables,
// in one open loop (gateway and worker, the rounds' open-loop rate): a
// reference stretch, then the DELETE callgate's retention ran before day
// partitions removes the oldest loaded day, then (once purge has caught
// up) another reference stretch and DROP PARTITION of the next day, which
// holds as many rows, then a last stretch. Each stretch (span) has the
// intake latency of the requests in flight during it.
type Retention struct {
	What     string           `json:"what"`
	Rate     float64          `json:"rate"`
	Delete   *RetentionDelete `json:"delete"`
	Drop     *RetentionDrop   `json:"drop"`
	Spans    []SpanStats      `json:"spans"`
	OpenLoop *OpenLoop        `json:"open_loop"`
	EndToEnd *EndToEnd        `json:"end_to_end,omitempty"`
}

// RetentionDelete is the old retention's run over one day.
type RetentionDelete struct {
	Day string `json:"day"`
	// Rows: what the day held before, per table; Deleted: what the
	// statements deleted; RowsAfter: what the day's partitions held
	// afterwards.
	Rows      map[string]int64 `json:"rows_before"`
	Deleted   map[string]int64 `json:"deleted"`
	RowsAfter map[string]int64 `json:"rows_after"`
	// Batches: one per batch of callbacks, outbox rows or keys (the last
	// of each short), and the longest.
	Batches        int     `json:"batches"`
	Seconds        float64 `json:"seconds"`
	LongestBatchMs float64 `json:"longest_batch_ms"`
	// InnoDB's history list length (undo records not purged yet; the
	// whole server's) before the first batch, after the last, and its
	// highest afterwards; PurgeSeconds: from the last batch until it was
	// back within purgeSlack of where it was (PurgeDone), or until
	// -retention-settle passed.
	HistoryBefore int64   `json:"history_before"`
	HistoryAfter  int64   `json:"history_after"`
	HistoryPeak   int64   `json:"history_peak"`
	PurgeSeconds  float64 `json:"purge_seconds"`
	PurgeDone     bool    `json:"purge_done"`
}

// RetentionDrop is DROP PARTITION of one day in each day-partitioned
// table.
type RetentionDrop struct {
	Day             string             `json:"day"`
	Partition       string             `json:"partition"`
	Rows            map[string]int64   `json:"rows_before"`
	Seconds         float64            `json:"seconds"`
	PerTableSeconds map[string]float64 `json:"per_table_seconds"`
	// Gone: the day's partition exists in no table afterwards.
	Gone bool `json:"gone"`
}

// Span is a stretch of an open loop's time, since its start.
type Span struct {
	Name     string
	From, To time.Duration
}

// SpanStats is the intake latency (from scheduled time) of the requests
// in flight at some moment of a span: scheduled before it ended and
// answered after it began.
type SpanStats struct {
	Name    string  `json:"name"`
	FromS   float64 `json:"from_s"`
	ToS     float64 `json:"to_s"`
	Errors  int     `json:"errors"`
	Latency Latency `json:"latency"`
}

func spanStats(recs []openRec, spans []Span) []SpanStats {
	var out []SpanStats
	for _, sp := range spans {
		st := SpanStats{Name: sp.Name, FromS: round(sp.From.Seconds(), 2), ToS: round(sp.To.Seconds(), 2)}
		var lats []time.Duration
		for _, r := range recs {
			if r.end == 0 || r.sched >= sp.To || r.end <= sp.From {
				continue
			}
			lats = append(lats, r.end-r.sched)
			if r.out != outAccepted {
				st.Errors++
			}
		}
		st.Latency = summarize(lats)
		out = append(out, st)
	}
	return out
}

// purgeSlack: purge has caught up when the history list length is back
// within this of where it was before the DELETE (other databases on
// the server write too).
const purgeSlack = 1000

// retention runs the retention phase.
func (b *bench) retention(ctx context.Context) (*Retention, error) {
	s := b.scale
	if len(s.days) < 2 {
		return nil, fmt.Errorf("retention needs two loaded days (-scale-days)")
	}
	del, drop := s.days[0], s.days[1]
	rt := &Retention{Rate: b.o.rate,
		Delete: &RetentionDelete{Day: del.Format(time.DateOnly)},
		Drop:   &RetentionDrop{Day: drop.Format(time.DateOnly), Partition: store.DayPartitionName(drop), PerTableSeconds: map[string]float64{}}}
	rt.What = fmt.Sprintf("gateway + worker at %.0f/s (the open loop's rate); meanwhile the retention callgate had before day partitions (its statements, batch_size %d) deletes day %s, then ALTER TABLE ... DROP PARTITION %s drops day %s of callback_log, callback_attempt and outbox",
		b.o.rate, b.o.retentionBatch, rt.Delete.Day, store.DayPartitionName(drop), rt.Drop.Day)
	var err error
	if rt.Delete.Rows, err = b.dayRows(ctx, del); err != nil {
		return rt, err
	}
	if rt.Drop.Rows, err = b.dayRows(ctx, drop); err != nil {
		return rt, err
	}
	// The old retention's session: the store's (READ COMMITTED).
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return rt, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		return rt, err
	}
	b.logf("retention: day %s (%d callbacks) by the old DELETE, then day %s (%d callbacks) by DROP PARTITION, under an open loop at %.0f/s",
		rt.Delete.Day, rt.Delete.Rows["callback_log"], rt.Drop.Day, rt.Drop.Rows["callback_log"], b.o.rate)
	ol, e2e, err := b.openRun(ctx, openSpec{name: "retention", tag: "rt", rate: b.o.rate, warmup: b.o.openWarmup, duration: b.o.retentionMax,
		worker: true, drainWait: b.o.drainTimeout, during: b.retentionSteps(rt, conn, del, drop)})
	rt.OpenLoop, rt.EndToEnd = ol, e2e
	if ol != nil {
		rt.Spans = ol.Spans
	}
	if err != nil {
		return rt, err
	}
	if rt.Delete.RowsAfter, err = b.dayRows(ctx, del); err != nil {
		return rt, err
	}
	var left int
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PARTITIONS
		WHERE TABLE_SCHEMA = DATABASE() AND PARTITION_NAME = ?`, store.DayPartitionName(drop)).Scan(&left); err != nil {
		return rt, err
	}
	rt.Drop.Gone = left == 0
	for _, sp := range rt.Spans {
		b.logf("retention: %-22s %6.1f s, intake p99 %7.1f ms, max %7.1f ms (%d requests)", sp.Name, sp.ToS-sp.FromS, sp.Latency.P99, sp.Latency.Max, sp.Latency.N)
	}
	return rt, nil
}

// retentionSteps is the retention phase's timeline, run beside the open
// loop from the end of its warm-up.
func (b *bench) retentionSteps(rt *Retention, conn *sql.Conn, del, drop time.Time) func(context.Context, time.Time) ([]Span, error) {
	return func(ctx context.Context, t0 time.Time) ([]Span, error) {
		var spans []Span
		since := func() time.Duration { return time.Since(t0) }
		wait := func(name string, d time.Duration) {
			from := since()
			sleepUntil(ctx, time.Now().Add(d))
			spans = append(spans, Span{Name: name, From: from, To: since()})
		}
		loadEnd := t0.Add(b.o.openWarmup + b.o.retentionMax)
		ref := b.o.retentionRef

		wait("before DELETE", ref)
		d := rt.Delete
		d.HistoryBefore = b.historyLength(ctx)
		from := since()
		err := b.oldDelete(ctx, conn, del.AddDate(0, 0, 1), d)
		spans = append(spans, Span{Name: "DELETE", From: from, To: since()})
		if err != nil {
			return spans, err
		}
		d.HistoryAfter = b.historyLength(ctx)
		b.logf("retention: DELETE of %s: %d callbacks, %d attempts, %d outbox rows in %.1fs (%d batches, longest %.0f ms); history list %d -> %d",
			d.Day, d.Deleted["callback_log"], d.Deleted["callback_attempt"], d.Deleted["outbox"], d.Seconds, d.Batches, d.LongestBatchMs, d.HistoryBefore, d.HistoryAfter)
		if left := time.Until(loadEnd); left < b.o.retentionSettle+2*ref+10*time.Second {
			return spans, fmt.Errorf("retention: the DELETE took %.0fs, leaving %.0fs of -retention-max %s for the rest: raise -retention-max", d.Seconds, left.Seconds(), b.o.retentionMax)
		}

		// After the DELETE: until purge has caught up (at least ref, at
		// most -retention-settle).
		from = since()
		start := time.Now()
		d.HistoryPeak = d.HistoryAfter
		for ctx.Err() == nil {
			h := b.historyLength(ctx)
			d.HistoryPeak = max(d.HistoryPeak, h)
			if !d.PurgeDone && h <= d.HistoryBefore+purgeSlack {
				d.PurgeDone, d.PurgeSeconds = true, round(time.Since(start).Seconds(), 1)
			}
			if (d.PurgeDone && time.Since(start) >= ref) || time.Since(start) >= b.o.retentionSettle {
				break
			}
			sleepUntil(ctx, time.Now().Add(500*time.Millisecond))
		}
		if !d.PurgeDone {
			d.PurgeSeconds = round(time.Since(start).Seconds(), 1)
		}
		spans = append(spans, Span{Name: "after DELETE", From: from, To: since()})

		wait("before DROP PARTITION", ref)
		from = since()
		err = b.dropDay(ctx, drop, rt.Drop)
		spans = append(spans, Span{Name: "DROP PARTITION", From: from, To: since()})
		if err != nil {
			return spans, err
		}
		b.logf("retention: DROP PARTITION %s in %.3fs", store.DayPartitionName(drop), rt.Drop.Seconds)
		wait("after DROP PARTITION", ref)
		return spans, ctx.Err()
	}
}

// dayRows counts a loaded day's rows in each day-partitioned table.
func (b *bench) dayRows(ctx context.Context, day time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	for _, t := range store.DayPartitioned {
		var n int64
		if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t+" PARTITION ("+store.DayPartitionName(day)+")").Scan(&n); err != nil {
			return nil, fmt.Errorf("counting %s of %s: %w", t, day.Format(time.DateOnly), err)
		}
		out[t] = n
	}
	return out, nil
}

// historyLength is InnoDB's history list length (-1: unknown).
func (b *bench) historyLength(ctx context.Context) int64 {
	var name string
	var n int64
	if err := b.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'").Scan(&name, &n); err != nil {
		return -1
	}
	return n
}

// dropDay drops a day's partition of each day-partitioned table, one
// ALTER TABLE each, as retention by partitions does.
func (b *bench) dropDay(ctx context.Context, day time.Time, r *RetentionDrop) error {
	t0 := time.Now()
	for _, t := range store.DayPartitioned {
		t1 := time.Now()
		if _, err := b.db.ExecContext(ctx, "ALTER TABLE "+t+" DROP PARTITION "+store.DayPartitionName(day)); err != nil {
			return fmt.Errorf("dropping %s of %s: %w", store.DayPartitionName(day), t, err)
		}
		r.PerTableSeconds[t] = round(time.Since(t1).Seconds(), 3)
	}
	r.Seconds = round(time.Since(t0).Seconds(), 3)
	return nil
}

// The retention callgate ran before day partitions, kept here as it was
// (internal/scheduler/retention.go's RunOnce with its max age set, and
// internal/store's DeleteSucceededBefore, DeleteSentBefore and
// DeleteKeysBefore, at 91805e0) so that make bench-scale can measure it
// against DROP PARTITION: the same statements, one batch after the other,
// each its own short transaction with a timeout of its own, until one
// comes back short. Its other steps (dead letters, events) have nothing
// to do on the loaded tables and are left out. The statements name no
// retain_day, as they did not: on the partitioned tables a lookup by id
// is made in every partition.

// oldDelete deletes what the old retention would with cutoff, and
// records it in d.
func (b *bench) oldDelete(ctx context.Context, conn *sql.Conn, cutoff time.Time, d *RetentionDelete) error {
	d.Deleted = map[string]int64{}
	var longest time.Duration
	t0 := time.Now()
	defer func() {
		d.Seconds = round(time.Since(t0).Seconds(), 1)
		d.LongestBatchMs = round(float64(longest)/1e6, 1)
	}()
	for _, step := range []func(context.Context) (int, error){
		func(ctx context.Context) (int, error) { return b.oldDeleteSucceeded(ctx, conn, cutoff, d) },
		func(ctx context.Context) (int, error) { return b.oldDeleteSent(ctx, conn, cutoff, d) },
		func(ctx context.Context) (int, error) { return b.oldDeleteKeys(ctx, conn, cutoff, d) },
	} {
		for ctx.Err() == nil {
			batchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			t := time.Now()
			n, err := step(batchCtx)
			cancel()
			longest = max(longest, time.Since(t))
			d.Batches++
			if err != nil {
				return fmt.Errorf("retention: the old DELETE: %w", err)
			}
			if n < b.o.retentionBatch {
				break
			}
		}
	}
	return ctx.Err()
}

// inList is ids as a SQL list.
func inList(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return "(" + strings.Join(s, ",") + ")"
}

// querier runs queries: the pool, a connection or a transaction.
type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// queryColumn reads a query's one column.
func queryColumn[T any](ctx context.Context, q querier, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// rowCount counts the rows a query returns.
func rowCount(ctx context.Context, q querier, query string, args ...any) (int, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// oldDeleteSucceeded is DeleteSucceededBefore: candidates read without
// locks, then in one transaction those still eligible locked, their
// events kept, their attempts and themselves deleted.
func (b *bench) oldDeleteSucceeded(ctx context.Context, conn *sql.Conn, cutoff time.Time, d *RetentionDelete) (int, error) {
	ids, err := queryColumn[int64](ctx, conn, "SELECT id FROM callback_log WHERE status = 'SUCCESS' AND processed_at < ? ORDER BY processed_at LIMIT ?",
		cutoff, b.o.retentionBatch)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	eligible, err := queryColumn[int64](ctx, tx, "SELECT id FROM callback_log WHERE id IN "+inList(ids)+" AND status = 'SUCCESS' AND processed_at < ? FOR UPDATE", cutoff)
	if err != nil || len(eligible) == 0 {
		return 0, err
	}
	list := inList(eligible)
	if _, err := tx.ExecContext(ctx, `INSERT INTO callback_event (source, event_id, log_id, received_at)
		SELECT source, event_id, id, received_at FROM callback_log WHERE id IN `+list+`
		ON DUPLICATE KEY UPDATE log_id = callback_event.log_id`); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM callback_attempt WHERE log_id IN "+list)
	if err != nil {
		return 0, err
	}
	attempts, _ := res.RowsAffected()
	if res, err = tx.ExecContext(ctx, "DELETE FROM callback_log WHERE id IN "+list); err != nil {
		return 0, err
	}
	callbacks, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	d.Deleted["callback_attempt"] += attempts
	d.Deleted["callback_log"] += callbacks
	return len(eligible), nil
}

// oldDeleteSent is DeleteSentBefore: ids by a plain read on (status,
// sent_at), then a delete by id.
func (b *bench) oldDeleteSent(ctx context.Context, conn *sql.Conn, cutoff time.Time, d *RetentionDelete) (int, error) {
	ids, err := queryColumn[int64](ctx, conn, "SELECT id FROM outbox WHERE status = 'SENT' AND sent_at < ? ORDER BY sent_at LIMIT ?", cutoff, b.o.retentionBatch)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	res, err := conn.ExecContext(ctx, "DELETE FROM outbox WHERE id IN "+inList(ids)+" AND status = 'SENT'")
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	d.Deleted["outbox"] += n
	return int(n), nil
}

// oldDeleteKeys is DeleteKeysBefore's read (the load writes no key rows:
// it finds none, as on a server whose keys retention already took).
func (b *bench) oldDeleteKeys(ctx context.Context, conn *sql.Conn, cutoff time.Time, d *RetentionDelete) (int, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	n, err := rowCount(ctx, tx, "SELECT kind, business_key FROM callback_key WHERE locked_at < ? ORDER BY locked_at LIMIT ? FOR UPDATE SKIP LOCKED",
		cutoff, b.o.retentionBatch)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		return 0, fmt.Errorf("callback_key has %d rows older than %s: the load writes none", n, cutoff.Format(time.DateOnly))
	}
	return 0, tx.Commit()
}
