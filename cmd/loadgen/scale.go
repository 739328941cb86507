package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"callgate/internal/store"
)

// make bench-scale (issue 40): the same phases twice in one run, first on
// empty tables, then on tables loaded with -scale callbacks spread over
// -scale-days past UTC days (each in its own day partition, as months of
// traffic leave them), at the same open-loop rate; then retention at
// that size: the DELETE callgate ran before day partitions against DROP
// PARTITION of another day of the same row count, each while the open
// loop runs (scale_retention.go).
//
// The loaded rows are what a month of paid callbacks leaves: SUCCESS
// callbacks with -payload-bytes payloads and Standard Webhooks headers,
// one SUCCESS attempt each, two SENT notifications each (warehouse.ship
// and points.add, as the payment handler writes for a paid order), and
// their events (callback_event). They are written with one INSERT ...
// SELECT per table and day from MariaDB's SEQUENCE engine (seq_1_to_N),
// in id order, a few table-days at once: minutes for millions of rows,
// where the gateway would take hours.
//
// The phases' rows all have ids above the loaded ones (their floors):
// the phases count and time only those, and between phases remove only
// them (the partitions past the loaded days), so each phase meets the
// loaded tables as they were loaded.

// scaleState is what the phases need to know of the loaded tables.
type scaleState struct {
	// loaded: the tables hold the loaded rows (from the load on).
	loaded bool
	// floors: per table, the highest id of the loaded rows.
	floors map[string]int64
	// liveFrom: the first day past the loaded ones (p_old's bound as the
	// migration made it): the phases' rows are in partitions from there.
	liveFrom time.Time
	// days: the loaded days, oldest first, and their callbacks.
	days   []time.Time
	perDay []int
}

// floor is the highest id of the loaded rows of table (0: none loaded).
func (b *bench) floor(table string) int64 {
	if b.scale == nil {
		return 0
	}
	return b.scale.floors[table]
}

// Load is what loading the tables took.
type Load struct {
	Callbacks int    `json:"callbacks"`
	Days      int    `json:"days"`
	FirstDay  string `json:"first_day"`
	LastDay   string `json:"last_day"`
	// Rows: per table, rows written.
	Rows map[string]int64 `json:"rows"`
	// PartitionSeconds: emptying the tables of the empty round's rows and
	// splitting p_old into the past days' partitions; InsertSeconds: the INSERT ... SELECTs;
	// FlushSeconds: ANALYZE TABLE, then writing the loaded pages out
	// (FLUSH TABLES ... FOR EXPORT), so that the phases do not pay for
	// the load's dirty pages.
	PartitionSeconds   float64 `json:"partition_seconds"`
	InsertSeconds      float64 `json:"insert_seconds"`
	FlushSeconds       float64 `json:"flush_seconds"`
	Seconds            float64 `json:"seconds"`
	CallbacksPerSecond float64 `json:"callbacks_per_second"`
	Connections        int     `json:"connections"`
	// TableMB: data and index MB per table (information_schema, after
	// ANALYZE TABLE); DiskFreeMB: what the file system of MariaDB's data
	// directory had free afterwards.
	TableMB     map[string]float64 `json:"table_mb"`
	DiskFreeMB  float64            `json:"disk_free_mb_after"`
	EstimatedMB float64            `json:"estimated_mb"`
}

// totalMB is the loaded tables' MB together.
func (ld *Load) totalMB() float64 {
	var mb float64
	for _, v := range ld.TableMB {
		mb += v
	}
	return mb
}

// loadedTables are the tables the load fills, in the order of a day's
// statements (callback_log first: the others point at its ids).
var loadedTables = []string{"callback_log", "callback_attempt", "outbox", "callback_event"}

// bytesPerCallback estimates the disk a loaded callback takes besides
// its payload: its row, attempt, two notifications and event with their
// indexes (measured on 3 million: 2.8 KB a callback with 1 KB payloads,
// 1.7 KB of it the callback_log row with its indexes).
const bytesPerCallback = 1800

// estimateMB is the disk the load should take.
func (b *bench) estimateMB() float64 {
	return float64(b.o.scale) * float64(b.o.payloadBytes+bytesPerCallback) / (1 << 20)
}

// diskFree returns the free MB of the file system holding MariaDB's
// data directory (the benchmark runs beside the server).
func (b *bench) diskFree(ctx context.Context) (float64, error) {
	dir := b.queryString(ctx, "SELECT @@datadir")
	if dir == "" {
		return 0, fmt.Errorf("reading MariaDB's datadir failed")
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("the file system of MariaDB's datadir %s: %w (bench-scale runs beside the server)", dir, err)
	}
	return float64(st.Bavail) * float64(st.Bsize) / (1 << 20), nil
}

// checkDisk refuses a load the disk would not hold with room to spare:
// the estimate plus a quarter, and 2 GB for everyone else.
func (b *bench) checkDisk(ctx context.Context) error {
	free, err := b.diskFree(ctx)
	if err != nil {
		return err
	}
	need := b.estimateMB()*1.25 + 2048
	if free < need {
		return fmt.Errorf("-scale %d needs about %.1f GB on MariaDB's disk (%.1f GB estimated, a quarter more, and 2 GB to spare), %.1f GB are free: pass a smaller -scale",
			b.o.scale, need/1024, b.estimateMB()/1024, free/1024)
	}
	b.logf("scale: %d callbacks should take about %.1f GB; %.1f GB free", b.o.scale, b.estimateMB()/1024, free/1024)
	return nil
}

// loadTables empties the callback tables, gives each day-partitioned
// table a partition per loaded day, and fills them.
func (b *bench) loadTables(ctx context.Context) (*Load, error) {
	t0 := time.Now()
	ld := &Load{Callbacks: b.o.scale, Days: b.o.scaleDays, Connections: b.o.scaleConns, Rows: map[string]int64{}, EstimatedMB: round(b.estimateMB(), 0)}
	// The empty round's rows go, its events too: the loaded round's
	// phases use the same event ids.
	for _, t := range append([]string{"callback_key"}, loadedTables...) {
		if _, err := b.db.ExecContext(ctx, "TRUNCATE TABLE "+t); err != nil {
			return ld, fmt.Errorf("truncating %s: %w", t, err)
		}
	}
	if err := b.partitionDays(ctx); err != nil {
		return ld, err
	}
	s := b.scale
	ld.FirstDay, ld.LastDay = s.days[0].Format(time.DateOnly), s.days[len(s.days)-1].Format(time.DateOnly)
	ld.PartitionSeconds = round(time.Since(t0).Seconds(), 1)
	b.logf("scale: partitions for %s .. %s; loading %d callbacks (%d a day), %d statements at once",
		ld.FirstDay, ld.LastDay, b.o.scale, s.perDay[0], b.o.scaleConns)

	t1 := time.Now()
	if err := b.insertDays(ctx, ld); err != nil {
		return ld, err
	}
	ld.InsertSeconds = round(time.Since(t1).Seconds(), 1)

	t2 := time.Now()
	for _, t := range loadedTables {
		if _, err := b.db.ExecContext(ctx, "ANALYZE TABLE "+t); err != nil {
			return ld, fmt.Errorf("analyzing %s: %w", t, err)
		}
	}
	if err := b.flushTables(ctx); err != nil {
		return ld, err
	}
	ld.FlushSeconds = round(time.Since(t2).Seconds(), 1)
	ld.Seconds = round(time.Since(t0).Seconds(), 1)
	ld.CallbacksPerSecond = round(float64(b.o.scale)/ld.Seconds, 0)

	s.floors = map[string]int64{}
	for _, t := range []string{"callback_log", "callback_attempt", "outbox"} {
		var id sql.NullInt64
		if err := b.db.QueryRowContext(ctx, "SELECT MAX(id) FROM "+t).Scan(&id); err != nil {
			return ld, fmt.Errorf("reading the highest id of %s: %w", t, err)
		}
		s.floors[t] = id.Int64
	}
	s.loaded = true
	var err error
	if ld.TableMB, err = b.tableMB(ctx); err != nil {
		return ld, err
	}
	free, err := b.diskFree(ctx)
	if err != nil {
		return ld, err
	}
	ld.DiskFreeMB = round(free, 0)
	b.logf("scale: loaded %d callbacks (%d attempts, %d outbox rows, %d events) in %.0fs (%.0f callbacks/s; inserts %.0fs, analyze and flush %.0fs); %.1f GB of tables, %.1f GB free",
		b.o.scale, ld.Rows["callback_attempt"], ld.Rows["outbox"], ld.Rows["callback_event"], ld.Seconds, ld.CallbacksPerSecond,
		ld.InsertSeconds, ld.FlushSeconds, ld.totalMB()/1024, free/1024)
	return ld, nil
}

// partitionDays splits each day-partitioned table's p_old (empty: a
// fresh database) into p_old and one partition per loaded day: the
// -scale-days days before p_old's bound, which the migration set to its
// own day (so the last loaded day is the day before the run's first).
func (b *bench) partitionDays(ctx context.Context) error {
	s := b.scale
	for i, table := range store.DayPartitioned {
		var desc string
		err := b.db.QueryRowContext(ctx, `SELECT PARTITION_DESCRIPTION FROM information_schema.PARTITIONS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND PARTITION_NAME = 'p_old'`, table).Scan(&desc)
		if err != nil {
			return fmt.Errorf("reading p_old of %s (bench-scale needs the day partitions, migration 025): %w", table, err)
		}
		bound, err := time.Parse(time.DateOnly, strings.Trim(desc, "'"))
		if err != nil {
			return fmt.Errorf("p_old of %s: unexpected bound %s", table, desc)
		}
		if i == 0 {
			s.liveFrom = bound
		} else if !bound.Equal(s.liveFrom) {
			return fmt.Errorf("p_old of %s ends at %s, of %s at %s", table, desc, store.DayPartitioned[0], s.liveFrom.Format(time.DateOnly))
		}
	}
	if today := time.Now().UTC().Truncate(24 * time.Hour); s.liveFrom.After(today) {
		return fmt.Errorf("p_old ends at %s, after today: the loaded days would overlap the phases'", s.liveFrom.Format(time.DateOnly))
	}
	s.days, s.perDay = spreadDays(s.liveFrom, b.o.scale, b.o.scaleDays)
	defs := []string{fmt.Sprintf("PARTITION p_old VALUES LESS THAN ('%s')", s.days[0].Format(time.DateOnly))}
	for _, d := range s.days {
		defs = append(defs, fmt.Sprintf("PARTITION %s VALUES LESS THAN ('%s')", store.DayPartitionName(d), d.AddDate(0, 0, 1).Format(time.DateOnly)))
	}
	for _, table := range store.DayPartitioned {
		q := "ALTER TABLE " + table + " REORGANIZE PARTITION p_old INTO (" + strings.Join(defs, ", ") + ")"
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("creating the partitions of %s: %w", table, err)
		}
	}
	return nil
}

// spreadDays spreads n callbacks over the days days before end, oldest
// first. The remainder goes to the newest days: the two oldest, which
// retention deletes and drops, hold as many.
func spreadDays(end time.Time, n, days int) (dates []time.Time, perDay []int) {
	for i := range days {
		dates = append(dates, end.AddDate(0, 0, i-days))
		c := n / days
		if i >= days-n%days {
			c++
		}
		perDay = append(perDay, c)
	}
	return dates, perDay
}

// loadJob is one statement of the load: one table's rows of one day.
type loadJob struct {
	table string
	day   time.Time
	first int64 // id of the day's first callback
	n     int
}

// insertDays runs the load's statements, -scale-conns at once, in day
// order (a day's four tables one after the other, so that statements
// running together mostly fill different tables).
func (b *bench) insertDays(ctx context.Context, ld *Load) error {
	norm, err := store.NormalizeDSN(b.dsn, 2*time.Second)
	if err != nil {
		return err
	}
	db, err := sql.Open("mysql", norm)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(b.o.scaleConns)
	db.SetMaxIdleConns(b.o.scaleConns)

	jobs := make(chan loadJob)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		done     int
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	total := len(b.scale.days) * len(loadedTables)
	lastLog := time.Now()
	for range b.o.scaleConns {
		wg.Go(func() {
			for j := range jobs {
				n, err := b.insertDay(ctx, db, j)
				mu.Lock()
				ld.Rows[j.table] += n
				done++
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				if time.Since(lastLog) > 15*time.Second {
					lastLog = time.Now()
					b.logf("scale: %d of %d statements done, %d callbacks", done, total, ld.Rows["callback_log"])
				}
				mu.Unlock()
			}
		})
	}
	var first int64 = 1
feed:
	for i, d := range b.scale.days {
		for _, t := range loadedTables {
			select {
			case jobs <- loadJob{table: t, day: d, first: first, n: b.scale.perDay[i]}:
			case <-ctx.Done():
				break feed
			}
		}
		first += int64(b.scale.perDay[i])
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// insertDay writes one table's rows of one day: callbacks first..first+n-1,
// received evenly over the day (none in its last 10 s, so that what each
// wrote later the same day stays in the day); an attempt's id is its
// callback's, notifications 2*id-1 (warehouse.ship) and 2*id (points.add).
func (b *bench) insertDay(ctx context.Context, db *sql.DB, j loadJob) (int64, error) {
	day := j.day.Format(time.DateOnly)
	id := fmt.Sprintf("(%d + s.seq)", j.first-1)
	// at(us): the callback's received_at plus us microseconds.
	at := func(us int) string {
		return fmt.Sprintf("(TIMESTAMP('%s') + INTERVAL (FLOOR((s.seq - 1) * 86390000000 / %d) + %d) MICROSECOND)", day, j.n, us)
	}
	eventID := "CONCAT('sc-', LPAD(" + id + ", 10, '0'))"
	orderCode := "CONCAT('SO', LPAD(" + id + " * 7919 % 1000003, 9, '0'))"
	amount := "(1000 + " + id + " % 9000)"
	from := fmt.Sprintf(" FROM seq_1_to_%d s", j.n)
	var q string
	var args []any
	switch j.table {
	case "callback_log":
		// The body loadgen's own callbacks have (request.go), padded to
		// -payload-bytes; every part but the padding has a fixed length.
		head := fmt.Sprintf(`{"orderCode":"SO000000000","paymentNo":"PAY-sc-0000000000","amount":0000,"status":"SUCCESS","paidAt":"%sT00:00:00Z","note":"`, day)
		pad := max(b.o.payloadBytes-len(head)-2, 0)
		q = `INSERT INTO callback_log (id, source, kind, event_id, business_key, status, attempts, attempts_base, payload, headers, trace_id,
			received_at, processed_at, origin, retain_day)
			SELECT ` + id + `, ?, ?, ` + eventID + `, ` + orderCode + `, 'SUCCESS', 1, 0,
			CONCAT('{"orderCode":"', ` + orderCode + `, '","paymentNo":"PAY-', ` + eventID + `, '","amount":', ` + amount + `,
				'` + fmt.Sprintf(`,"status":"SUCCESS","paidAt":"%sT00:00:00Z","note":"`, day) + `', REPEAT('x', ` + fmt.Sprint(pad) + `), '"}'),
			CONCAT('{"Content-Type":"application/json","User-Agent":"callgate-loadgen","Webhook-Id":"', ` + eventID + `,
				'","Webhook-Signature":"v1,', REPEAT('A', 44), '","Webhook-Timestamp":"', UNIX_TIMESTAMP(` + at(0) + `) DIV 1, '"}'),
			LPAD(HEX(` + id + `), 32, '0'), ` + at(0) + `, ` + at(40000) + `, 'notify', '` + day + `'` + from
		args = []any{b.source, b.kind}
	case "callback_attempt":
		q = `INSERT INTO callback_attempt (id, log_id, attempt, started_at, finished_at, outcome, worker_id, retain_day)
			SELECT ` + id + `, ` + id + `, 1, ` + at(10000) + `, ` + at(35000) + `, 'SUCCESS', ?, '` + day + `'` + from
		args = []any{"bench-worker-" + b.runID}
	case "outbox":
		q = `INSERT INTO outbox (id, callback_log_id, exchange, routing_key, message_id, payload, headers, status, attempts, created_at, sent_at, retain_day)
			SELECT 2 * ` + id + ` - 1 + k.seq, ` + id + `, ?, IF(k.seq = 0, 'warehouse.ship', 'points.add'),
			CONCAT('cb', ` + id + `, IF(k.seq = 0, '.warehouse.ship', '.points.add')),
			IF(k.seq = 0, CONCAT('{"orderCode":"', ` + orderCode + `, '"}'),
				CONCAT('{"amount":', ` + amount + `, ',"currency":"CNY","orderCode":"', ` + orderCode + `, '","userId":', 1 + ` + id + ` % 100000, '}')),
			CONCAT('{"traceparent":"00-', LPAD(HEX(` + id + `), 32, '0'), '-', LPAD(HEX(2 * ` + id + ` + k.seq), 16, '0'), '-01"}'),
			'SENT', 0, ` + at(30000) + `, ` + at(45000) + `, '` + day + `'` + from + ` JOIN seq_0_to_1 k`
		args = []any{b.prefix + ".downstream"}
	case "callback_event":
		q = `INSERT INTO callback_event (source, event_id, log_id, received_at)
			SELECT ?, ` + eventID + `, ` + id + `, ` + at(0) + from
		args = []any{b.source}
	default:
		return 0, fmt.Errorf("no load for table %s", j.table)
	}
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("loading %s of %s: %w", j.table, day, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// flushTables writes the loaded tables' dirty pages out (FLUSH TABLES
// ... FOR EXPORT waits until they are on disk), as they would be on a
// server that took a month to fill them.
func (b *bench) flushTables(ctx context.Context) error {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "FLUSH TABLES "+strings.Join(loadedTables, ", ")+" FOR EXPORT"); err != nil {
		return fmt.Errorf("flushing the loaded tables: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		return fmt.Errorf("flushing the loaded tables: %w", err)
	}
	return nil
}

// tableMB is each loaded table's data and index MB.
func (b *bench) tableMB(ctx context.Context) (map[string]float64, error) {
	rows, err := b.db.QueryContext(ctx, `SELECT TABLE_NAME, (DATA_LENGTH + INDEX_LENGTH) / 1048576 FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('`+strings.Join(loadedTables, "','")+`')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var t string
		var mb float64
		if err := rows.Scan(&t, &mb); err != nil {
			return nil, err
		}
		out[t] = round(mb, 0)
	}
	return out, rows.Err()
}

// clearLive removes the phases' rows from the loaded tables: the
// partitions past the loaded days are truncated (the loaded ones are
// left alone), and callback_key, which the load does not fill, is
// emptied. callback_event keeps the phases' events, as TRUNCATE does
// on empty tables.
func (b *bench) clearLive(ctx context.Context) error {
	for _, table := range store.DayPartitioned {
		names, err := queryColumn[string](ctx, b.db, `SELECT PARTITION_NAME FROM information_schema.PARTITIONS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND (PARTITION_DESCRIPTION = 'MAXVALUE' OR PARTITION_DESCRIPTION > ?)
			ORDER BY PARTITION_ORDINAL_POSITION`, table, "'"+b.scale.liveFrom.Format(time.DateOnly)+"'")
		if err != nil {
			return fmt.Errorf("reading the partitions of %s: %w", table, err)
		}
		if len(names) == 0 {
			continue
		}
		if _, err := b.db.ExecContext(ctx, "ALTER TABLE "+table+" TRUNCATE PARTITION "+strings.Join(names, ", ")); err != nil {
			return fmt.Errorf("emptying the phases' partitions of %s: %w", table, err)
		}
	}
	if _, err := b.db.ExecContext(ctx, "TRUNCATE TABLE callback_key"); err != nil {
		return fmt.Errorf("truncating callback_key: %w", err)
	}
	return nil
}

// runScale is make bench-scale's run: setup, the phases on empty tables,
// the load, the phases again, retention.
func (b *bench) runScale(ctx context.Context) (*ScaleReport, error) {
	sr := &ScaleReport{Empty: newReport(b)}
	sr.Command = sr.Empty.Command
	sr.Settings = ScaleSettings{Callbacks: b.o.scale, Days: b.o.scaleDays, Connections: b.o.scaleConns, RetentionReferenceS: b.o.retentionRef.Seconds(),
		RetentionSettleMaxS: b.o.retentionSettle.Seconds(), RetentionMaxS: b.o.retentionMax.Seconds(), RetentionBatchSize: b.o.retentionBatch}
	defer func() { sr.TotalSeconds = round(time.Since(b.started).Seconds(), 1) }()
	if err := b.setup(ctx, sr.Empty); err != nil {
		return sr, err
	}
	if err := b.checkDisk(ctx); err != nil {
		return sr, err
	}
	b.scale = &scaleState{}
	b.logf("scale: the phases on empty tables")
	if err := b.runPhases(ctx, sr.Empty); err != nil {
		return sr, err
	}
	// The loaded round and retention run at the empty round's open-loop
	// rate, whatever the baseline at size.
	if b.o.rate == 0 {
		b.o.rate = round(b.o.openRatio*b.baselineRate, 0)
	}
	sr.Settings.OpenRate = b.o.rate

	var err error
	if sr.Load, err = b.loadTables(ctx); err != nil {
		return sr, err
	}
	sr.Loaded = newReport(b)
	sr.Loaded.Machine = sr.Empty.Machine
	sr.Loaded.Machine.BusyBeforeStartPct = machineBusyNow(time.Second)
	sr.Loaded.Settings.WorkerBatchSize = sr.Empty.Settings.WorkerBatchSize
	b.logf("scale: the phases on the loaded tables")
	if err := b.runPhases(ctx, sr.Loaded); err != nil {
		return sr, err
	}
	if b.o.phases["retention"] {
		if sr.Retention, err = b.retention(ctx); err != nil {
			return sr, err
		}
	}
	return sr, nil
}
