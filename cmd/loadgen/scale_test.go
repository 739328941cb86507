package main

import (
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/store"
	"callgate/internal/testenv"
)

// make bench-scale's load and retention steps on the real MariaDB, at a
// few callbacks a day: what the load writes is what the phases and the
// retention steps rely on.
func TestScaleLoadAndRetention(t *testing.T) {
	ctx := t.Context()
	dsn := testenv.DB(t)
	norm, err := store.NormalizeDSN(dsn, 2*time.Second)
	require.NoError(t, err)
	db, err := sql.Open("mysql", norm)
	require.NoError(t, err)
	defer db.Close()
	b := &bench{o: options{scale: 90, scaleDays: 3, scaleConns: 2, payloadBytes: 1024, retentionBatch: 7},
		dsn: dsn, db: db, source: "paydemo", kind: "payment", prefix: "callgate-t", runID: "t", started: time.Now(), scale: &scaleState{}}

	ld, err := b.loadTables(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"callback_log": 90, "callback_attempt": 90, "outbox": 180, "callback_event": 90}, ld.Rows)
	days := b.scale.days
	require.Len(t, days, 3)
	require.Equal(t, b.scale.liveFrom, days[2].AddDate(0, 0, 1), "the last loaded day is the one before the phases'")
	for _, d := range days {
		rows, err := b.dayRows(ctx, d)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"callback_log": 30, "callback_attempt": 30, "outbox": 60}, rows, d)
	}

	// Each callback SUCCESS, with a payload of -payload-bytes of JSON,
	// processed on the day it was received, in that day's partition; its
	// attempt and notifications too.
	type logRow struct {
		payload, headers                  []byte
		status                            string
		retainDay, received, processedDay time.Time
	}
	rs, err := db.QueryContext(ctx, `SELECT payload, headers, status, retain_day, received_at, DATE(processed_at) FROM callback_log ORDER BY id`)
	require.NoError(t, err)
	defer rs.Close()
	n := 0
	for rs.Next() {
		var r logRow
		require.NoError(t, rs.Scan(&r.payload, &r.headers, &r.status, &r.retainDay, &r.received, &r.processedDay))
		require.Equal(t, "SUCCESS", r.status)
		require.Len(t, r.payload, 1024)
		require.True(t, json.Valid(r.payload), "%s", r.payload)
		require.True(t, json.Valid(r.headers), "%s", r.headers)
		day := r.received.Truncate(24 * time.Hour)
		require.Equal(t, day, r.retainDay)
		require.Equal(t, day, r.processedDay)
		n++
	}
	require.NoError(t, rs.Err())
	require.Equal(t, 90, n)
	var mismatched int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM callback_attempt a JOIN callback_log l ON l.id = a.log_id WHERE a.retain_day <> l.retain_day OR a.outcome <> 'SUCCESS') +
		(SELECT COUNT(*) FROM outbox o JOIN callback_log l ON l.id = o.callback_log_id WHERE o.retain_day <> l.retain_day OR o.status <> 'SENT' OR DATE(o.sent_at) <> l.retain_day) +
		(SELECT COUNT(*) FROM callback_event e LEFT JOIN callback_log l ON l.id = e.log_id AND l.event_id = e.event_id WHERE l.id IS NULL)`).Scan(&mismatched))
	require.Zero(t, mismatched, "attempts, notifications and events belong to their callback and its day")

	// A phase's row (today's) goes between phases; the loaded ones stay.
	_, err = db.ExecContext(ctx, `INSERT INTO callback_log (source, kind, event_id, business_key, payload, trace_id, received_at)
		VALUES ('paydemo', 'payment', 'phase-1', 'BO1', '{}', REPEAT('0', 32), UTC_TIMESTAMP(6))`)
	require.NoError(t, err)
	require.NoError(t, b.clearLive(ctx))
	require.Equal(t, 90, count(t, db, "SELECT COUNT(*) FROM callback_log"))

	// The old retention deletes the oldest day, in batches, and nothing
	// else; the events stay.
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	d := &RetentionDelete{}
	require.NoError(t, b.oldDelete(ctx, conn, days[0].AddDate(0, 0, 1), d))
	require.Equal(t, map[string]int64{"callback_log": 30, "callback_attempt": 30, "outbox": 60}, d.Deleted)
	require.Greater(t, d.Batches, 60/7)
	left, err := b.dayRows(ctx, days[0])
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"callback_log": 0, "callback_attempt": 0, "outbox": 0}, left)
	require.Equal(t, 60, count(t, db, "SELECT COUNT(*) FROM callback_log"))
	require.Equal(t, 90, count(t, db, "SELECT COUNT(*) FROM callback_event"))

	// DROP PARTITION takes the next day from every table.
	dr := &RetentionDrop{PerTableSeconds: map[string]float64{}}
	require.NoError(t, b.dropDay(ctx, days[1], dr))
	require.Zero(t, count(t, db, "SELECT COUNT(*) FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND PARTITION_NAME = '"+store.DayPartitionName(days[1])+"'"))
	require.Equal(t, 30, count(t, db, "SELECT COUNT(*) FROM callback_log"))
	require.Equal(t, 60, count(t, db, "SELECT COUNT(*) FROM outbox"))
}

func count(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), q).Scan(&n))
	return n
}

func TestSpreadDays(t *testing.T) {
	end := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	dates, perDay := spreadDays(end, 100, 30)
	require.Len(t, dates, 30)
	require.Equal(t, time.Date(2026, 11, 6, 0, 0, 0, 0, time.UTC), dates[0])
	require.Equal(t, time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC), dates[29])
	sum := 0
	for _, c := range perDay {
		sum += c
	}
	require.Equal(t, 100, sum)
	require.Equal(t, perDay[0], perDay[1], "the deleted and the dropped day hold as many")
	require.Equal(t, []int{3, 4}, []int{perDay[0], perDay[29]})
}

// A span counts every request in flight during it: one scheduled before
// it and held until it (a DDL's lock) counts, with its whole latency.
func TestSpanStats(t *testing.T) {
	ms := time.Millisecond
	recs := []openRec{
		{sched: 100 * ms, end: 110 * ms, out: outAccepted},   // before
		{sched: 900 * ms, end: 1500 * ms, out: outAccepted},  // held into the span
		{sched: 1100 * ms, end: 1150 * ms, out: outNon2xx},   // in it, a 503
		{sched: 2100 * ms, end: 2120 * ms, out: outAccepted}, // after
		{sched: 1200 * ms}, // never sent
	}
	got := spanStats(recs, []Span{{Name: "DROP", From: time.Second, To: 2 * time.Second}})
	require.Len(t, got, 1)
	require.Equal(t, 2, got[0].Latency.N)
	require.Equal(t, 1, got[0].Errors)
	require.Equal(t, 600.0, got[0].Latency.Max)
}

// The retention open loop may store a row for a 503 (a commit that went
// through past the gateway's store timeout), never miss one for a 200.
func TestRetentionRowsCheck(t *testing.T) {
	for _, tc := range []struct {
		rows, accepted, non2xx int
		ok                     bool
	}{
		{rows: 100, accepted: 100, ok: true},
		{rows: 103, accepted: 100, non2xx: 5, ok: true},
		{rows: 106, accepted: 100, non2xx: 5, ok: false},
		{rows: 99, accepted: 100, non2xx: 5, ok: false},
	} {
		ol := &OpenLoop{Verify: Verify{Accepted: tc.accepted, RowsInDB: tc.rows}, Measured: WindowStats{Non2xx: tc.non2xx}}
		sr := &ScaleReport{Retention: &Retention{OpenLoop: ol, Delete: &RetentionDelete{}, Drop: &RetentionDrop{}}}
		sr.checks()
		require.Len(t, sr.Checks, 1)
		require.Equal(t, tc.ok, sr.Checks[0].Met, "%+v", tc)
	}
}
