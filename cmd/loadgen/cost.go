package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// costOptions are the cost phase's flags (docs/capacity.md).
type costOptions struct {
	callbacks int
	rate      float64
	idle      time.Duration
	// replicaMark meters a replica's mariadbd too (a text of its command
	// line, e.g. its datadir): what applying the primary's binlog costs;
	// replicaDSN reads its counters (bytes written).
	replicaMark string
	replicaDSN  string
	// flush has MariaDB write every dirty page before and after the
	// window, so that the data files' writes of the callbacks are counted.
	flush bool
}

func (c *costOptions) register() {
	flag.IntVar(&c.callbacks, "cost-callbacks", 20000, "cost phase: callbacks sent (each paying an order of its own); every figure is divided by them")
	flag.Float64Var(&c.rate, "cost-rate", 500, "cost phase: arrival rate, callbacks per second (the intake's and the worker's batches, and so the cost per callback, depend on it)")
	flag.DurationVar(&c.idle, "cost-idle", 10*time.Second, "cost phase: the processes' idle CPU is measured over this long before the load, and taken out of the per-callback figures")
	flag.StringVar(&c.replicaMark, "cost-replica-proc", "", "cost phase: also meter the replica mariadbd whose command line contains this")
	flag.StringVar(&c.replicaDSN, "cost-replica", "", "cost phase: a replica of -mysql (DSN) whose bytes written are read too, once it has applied everything")
	flag.BoolVar(&c.flush, "cost-flush", false, "cost phase: SET GLOBAL innodb_max_dirty_pages_pct = 0 until no page is dirty, before and after the load (put back after), to count the data files' writes; only on a server of your own")
}

// costStatusVars are MariaDB's counters the cost phase reads before and
// after: statements, commits, and the bytes written to the redo log
// (Innodb_lsn_current advances by every byte of redo; Innodb_os_log_written
// is the server's own count), the binlog and the data files.
var costStatusVars = []string{"Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_begin", "Com_commit",
	"Com_rollback", "Handler_commit", "Binlog_commits", "Binlog_group_commits", "Binlog_bytes_written", "Innodb_lsn_current",
	"Innodb_os_log_written", "Innodb_data_written", "Innodb_pages_written", "Innodb_dblwr_pages_written", "Innodb_data_fsyncs", "Rows_read"}

// costTables are the tables whose growth the phase reports: the
// callback's own (kept scheduler.retention.max_age, callback_event
// dedupe_max_age) and the payment's business rows.
var costTables = []string{"callback_log", "callback_attempt", "outbox", "callback_event", "callback_key", "payment_facts", "orders"}

// Cost is the cost phase: a fixed number of callbacks through the gateway
// with the worker processing them as they come, and what each process,
// MariaDB and RabbitMQ spent on them, per callback.
type Cost struct {
	What      string  `json:"what"`
	Callbacks int     `json:"callbacks"`
	Rate      float64 `json:"rate"`
	// Accepted: 200s; Succeeded: SUCCESS rows afterwards; OutboxRows,
	// OutboxSent: the notifications, all SENT when the window closed.
	Accepted   int      `json:"accepted"`
	Errors     int      `json:"errors"`
	RowsInDB   int      `json:"rows_in_db"`
	Succeeded  int      `json:"succeeded"`
	Failed     int      `json:"failed"`
	Pending    int      `json:"pending"`
	OutboxRows int      `json:"outbox_rows"`
	OutboxSent int      `json:"outbox_sent"`
	Done       bool     `json:"done"`
	FirstErrs  []string `json:"first_errors,omitempty"`
	// Processed: the worker's SUCCESS and FAILED in the window. Every
	// per-callback figure is divided by it: a callback answered 503 may
	// have been stored, and cost, all the same.
	Processed int `json:"processed"`
	// Latency from each request's scheduled send (informational: the
	// rate is below what the machine sustains, and it is shared).
	Latency Latency `json:"latency"`
	// Idle: each process's CPU over -cost-idle with gateway and worker
	// up and nothing sent, in % of one core.
	Idle Resources `json:"idle"`
	// Window: from the first send to the last notification SENT.
	Window Resources `json:"window"`
	// CPUms: each process's CPU in the window per processed callback;
	// CPUmsNet: less its idle rate over the window (the cost of the
	// callbacks alone). "machine": all of the machine's (others' too).
	CPUms    map[string]float64 `json:"cpu_ms_per_callback"`
	CPUmsNet map[string]float64 `json:"cpu_ms_per_callback_net_of_idle"`
	// MariaDB: increase of each counter of costStatusVars per callback.
	MariaDB map[string]float64 `json:"mariadb_per_callback"`
	// LogBin, BinlogFormat, BinlogRowImage, SyncBinlog: the server's.
	LogBin         bool   `json:"log_bin"`
	BinlogFormat   string `json:"binlog_format"`
	BinlogRowImage string `json:"binlog_row_image"`
	SyncBinlog     string `json:"sync_binlog"`
	// Flushed: -cost-flush; DataWritten: then, the bytes InnoDB wrote to
	// its data files (doublewrite included) from the flush before the
	// load to the flush after it, per callback.
	Flushed     bool    `json:"flushed"`
	DataWritten float64 `json:"data_files_bytes_per_callback,omitempty"`
	// Replica: -cost-replica's counters (costStatusVars) per callback,
	// read once it had applied everything the primary wrote.
	Replica map[string]float64 `json:"replica_per_callback,omitempty"`
	// Tables: growth of each table over the phase.
	Tables []TableGrowth `json:"tables"`
	// Broker: messages per callback. Announcements: the gateway's
	// confirmed publishes (one per group commit and kind) and the worker's
	// own (re-announcements, wake-ups); Notifications: the worker's
	// confirmed outbox publishes; Unrouted: notifications the broker kept
	// in <prefix>.downstream.unrouted (nobody is bound downstream here).
	Announcements       float64 `json:"announcements"`
	WorkerAnnouncements float64 `json:"worker_announcements"`
	Notifications       float64 `json:"notifications"`
	Unrouted            int     `json:"unrouted"`
	// WorkerBatches: the worker's batch transactions (callgate_batch_size).
	WorkerBatches   float64 `json:"worker_batches"`
	WorkerBatchMean float64 `json:"worker_batch_mean"`
	GatewayRSSMB    float64 `json:"gateway_peak_rss_mb"`
	WorkerRSSMB     float64 `json:"worker_peak_rss_mb"`
}

// TableGrowth is what one table gained: rows, InnoDB's data and index
// bytes (after ANALYZE TABLE), and its .ibd files' allocated bytes (all
// its partitions), each also per callback.
type TableGrowth struct {
	Table          string  `json:"table"`
	Rows           int64   `json:"rows"`
	DataBytes      int64   `json:"data_bytes"`
	IndexBytes     int64   `json:"index_bytes"`
	FileBytes      int64   `json:"file_bytes"`
	RowsPerCB      float64 `json:"rows_per_callback"`
	BytesPerCB     float64 `json:"data_and_index_bytes_per_callback"`
	FileBytesPerCB float64 `json:"file_bytes_per_callback"`
}

// tableSize is one table's state at one moment.
type tableSize struct {
	rows, data, index, file int64
}

// cost runs the cost phase.
func (b *bench) cost(ctx context.Context) (*Cost, error) {
	o := b.o.cost
	if o.callbacks < 1 || o.rate <= 0 || o.idle <= 0 {
		return nil, errors.New("cost phase: -cost-callbacks, -cost-rate and -cost-idle must be positive")
	}
	n := o.callbacks
	c := &Cost{Callbacks: n, Rate: o.rate,
		What: fmt.Sprintf("%d payment callbacks (~%d B each, each paying its own order) at %.0f/s to the gateway as shipped (group commit), the worker (batch size %d) processing them as they come; from the first send to the last notification SENT",
			n, b.o.payloadBytes, o.rate, b.batchSize)}
	c.LogBin = b.queryString(ctx, "SELECT @@log_bin") == "1"
	c.BinlogFormat = b.queryString(ctx, "SELECT @@binlog_format")
	c.BinlogRowImage = b.queryString(ctx, "SELECT @@binlog_row_image")
	c.SyncBinlog = b.queryString(ctx, "SELECT @@sync_binlog")
	if err := b.purge(b.queue()); err != nil && !isNotFound(err) {
		return c, err
	}
	if _, err := b.takeUnrouted(); err != nil {
		return c, err
	}
	if err := b.truncate(ctx); err != nil {
		return c, err
	}
	if err := b.freshOrders(ctx, n); err != nil {
		return c, err
	}
	before, err := b.tableSizes(ctx)
	if err != nil {
		return c, err
	}

	wk, wbase, err := b.startWorker(ctx, "cost-worker", variant{})
	if err != nil {
		return c, err
	}
	defer wk.stop(25 * time.Second)
	gw, base, err := b.startGateway(ctx, "cost", variant{groupCommit: true})
	if err != nil {
		return c, err
	}
	defer gw.stop(15 * time.Second)
	procs := b.baseProcs()
	procs["gateway"], procs["worker"] = gw.pid(), wk.pid()
	if o.replicaMark != "" {
		if p := findDB(o.replicaMark); p > 0 {
			procs["replica"] = p
		} else {
			b.logf("cost: no mariadbd mentions %q: the replica is not metered", o.replicaMark)
		}
	}
	hwm := map[string]bool{"gateway": true, "worker": true}

	if o.flush {
		if err := b.flushPages(ctx); err != nil {
			return c, err
		}
		c.Flushed = true
	}
	var replica *sql.DB
	var replica0 map[string]float64
	if o.replicaDSN != "" {
		if replica, err = sql.Open("mysql", o.replicaDSN); err != nil {
			return c, err
		}
		defer replica.Close()
		if replica0 = readStatus(replica, costStatusVars); replica0 == nil {
			return c, fmt.Errorf("cost: cannot read the counters of -cost-replica %s", o.replicaDSN)
		}
	}
	b.logf("cost: gateway pid %d, worker pid %d; idle for %s", gw.pid(), wk.pid(), o.idle)
	idle := startMeter(procs, hwm, b.costStatus, b.foreignQueries)
	sleepUntil(ctx, time.Now().Add(o.idle))
	c.Idle = idle.finish()

	gm0, err := scrape(base + "/metrics")
	if err != nil {
		return c, err
	}
	wm0, err := scrape(wbase + "/metrics")
	if err != nil {
		return c, err
	}
	b.logf("cost: %d callbacks at %.0f/s", n, o.rate)
	s0 := b.costStatus()
	m := startMeter(procs, hwm, b.costStatus, b.foreignQueries)
	recs, errs := b.costSend(ctx, base, n, o.rate)
	c.FirstErrs = errs
	var lats []time.Duration
	for _, r := range recs {
		if r.out == outAccepted {
			c.Accepted++
			lats = append(lats, r.end-r.sched)
		} else if r.end > 0 {
			c.Errors++
		}
	}
	c.Latency = summarize(lats)
	c.Done = b.costSettle(ctx, wbase, wm0, c.Accepted, replica, time.Now().Add(b.o.drainMax))
	c.Window = m.finish()
	if err := ctx.Err(); err != nil {
		return c, err
	}
	if !c.Done {
		b.logf("cost: not settled %s after the last send", b.o.drainMax)
	}
	gm1, err := scrape(base + "/metrics")
	if err != nil {
		return c, err
	}
	wm1, err := scrape(wbase + "/metrics")
	if err != nil {
		return c, err
	}
	delta := func(a, z metricsText, name string, matchers ...string) float64 {
		return z.sum(name, matchers...) - a.sum(name, matchers...)
	}
	c.Processed = int(delta(wm0, wm1, "callgate_callbacks_processed_total", `outcome="success"`) +
		delta(wm0, wm1, "callgate_callbacks_processed_total", `outcome="failed"`))
	c.Announcements = delta(gm0, gm1, "callgate_announcements_total", `result="published"`)
	c.WorkerAnnouncements = delta(wm0, wm1, "callgate_announcements_total", `result="published"`)
	c.Notifications = delta(wm0, wm1, "callgate_outbox_published_total")
	cnt0, sum0 := histogram(wm0, "callgate_batch_size")
	cnt1, sum1 := histogram(wm1, "callgate_batch_size")
	c.WorkerBatches = cnt1 - cnt0
	if c.WorkerBatches > 0 {
		c.WorkerBatchMean = round((sum1-sum0)/c.WorkerBatches, 1)
	}
	if o.flush {
		if err := b.flushPages(ctx); err != nil {
			return c, err
		}
		if s := b.costStatus(); s != nil && s0 != nil && c.Processed > 0 {
			c.DataWritten = round((s["Innodb_data_written"]-s0["Innodb_data_written"])/float64(c.Processed), 0)
		}
	}
	if replica != nil && c.Processed > 0 {
		if r1 := readStatus(replica, costStatusVars); r1 != nil {
			c.Replica = map[string]float64{}
			for k, v := range r1 {
				c.Replica[k] = round((v-replica0[k])/float64(c.Processed), 3)
			}
		}
	}

	if h, err := peakHWM(gw.pid()); err == nil {
		c.GatewayRSSMB = h
	}
	if h, err := peakHWM(wk.pid()); err == nil {
		c.WorkerRSSMB = h
	}
	wk.stop(25 * time.Second)
	gw.stop(15 * time.Second)

	if c.Processed > 0 {
		per := float64(c.Processed)
		c.CPUms = cpuPerCallback(c.Window, per)
		c.CPUmsNet = map[string]float64{}
		for name, u := range c.Window.Procs {
			idleRate := c.Idle.Procs[name].CPUSeconds / c.Idle.WindowSeconds
			c.CPUmsNet[name] = round(1000*max(u.CPUSeconds-idleRate*c.Window.WindowSeconds, 0)/per, 3)
		}
		c.MariaDB = map[string]float64{}
		for k, v := range c.Window.MariaDB {
			c.MariaDB[k] = round(v/per, 3)
		}
	}

	byStatus, err := b.countByStatus(ctx, "callback_log")
	if err != nil {
		return c, err
	}
	c.Succeeded, c.Failed, c.Pending = byStatus["SUCCESS"], byStatus["FAILED"], byStatus["PENDING"]
	c.RowsInDB = c.Succeeded + c.Failed + c.Pending
	outbox, err := b.countByStatus(ctx, "outbox")
	if err != nil {
		return c, err
	}
	for _, k := range outbox {
		c.OutboxRows += k
	}
	c.OutboxSent = outbox["SENT"]
	after, err := b.tableSizes(ctx)
	if err != nil {
		return c, err
	}
	for _, t := range costTables {
		g := TableGrowth{Table: t, Rows: after[t].rows - before[t].rows, DataBytes: after[t].data - before[t].data,
			IndexBytes: after[t].index - before[t].index, FileBytes: after[t].file - before[t].file}
		if c.Processed > 0 {
			per := float64(c.Processed)
			g.RowsPerCB = round(float64(g.Rows)/per, 2)
			g.BytesPerCB = round(float64(g.DataBytes+g.IndexBytes)/per, 0)
			g.FileBytesPerCB = round(float64(g.FileBytes)/per, 0)
		}
		c.Tables = append(c.Tables, g)
	}
	if c.Unrouted, err = b.takeUnrouted(); err != nil {
		return c, err
	}
	b.logf("cost: %d accepted, %d SUCCESS in %.1fs; CPU ms per callback (net of idle) gateway %.3f, worker %.3f, mariadbd %.3f, beam.smp %.3f",
		c.Accepted, c.Succeeded, c.Window.WindowSeconds, c.CPUmsNet["gateway"], c.CPUmsNet["worker"], c.CPUmsNet["mariadbd"], c.CPUmsNet["beam.smp"])
	if err := b.purge(b.queue()); err != nil {
		return c, err
	}
	return c, b.truncate(ctx)
}

// costSend sends callbacks 0..n-1 at rate, each on its own goroutine at its
// scheduled time (an overdue one goes at once and keeps its time).
func (b *bench) costSend(ctx context.Context, base string, n int, rate float64) ([]openRec, []string) {
	gen := &callbackGen{url: base + "/callbacks/" + b.source, secret: b.secret, tag: "cost", runID: b.runID, payloadBytes: b.o.payloadBytes, orders: n}
	cl := &http.Client{Transport: newTransport(b.o.openMaxConns), Timeout: b.o.reqTimeout}
	defer cl.CloseIdleConnections()
	recs := make([]openRec, n)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	t0 := time.Now()
	for i := 0; i < n && ctx.Err() == nil; {
		now := time.Since(t0)
		if at := time.Duration(float64(i) * 1e9 / rate); at > now {
			time.Sleep(at - now)
			continue
		}
		k := i
		i++
		wg.Go(func() {
			r := &recs[k]
			r.sched = time.Duration(float64(k) * 1e9 / rate)
			r.start = time.Since(t0)
			req, err := gen.request(k)
			if err == nil {
				r.out, _, err = do(cl, req.WithContext(ctx))
			} else {
				r.out = outTransport
			}
			r.end = time.Since(t0)
			if err != nil {
				mu.Lock()
				if len(errs) < 5 {
					errs = append(errs, err.Error())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return recs, errs
}

// costSettle waits until the worker has processed every callback stored
// (at least the accepted ones) and the broker confirmed every notification they made, then, with a
// replica, until it has applied everything the primary logged; false at
// deadline. It reads the worker's counters, and the database twice: a
// query polled in the window would be counted in MariaDB's figures.
func (b *bench) costSettle(ctx context.Context, wbase string, wm0 metricsText, accepted int, replica *sql.DB, deadline time.Time) bool {
	waitFor := func(done func() bool) bool {
		for ctx.Err() == nil && time.Now().Before(deadline) {
			if done() {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}
	counter := func(name string, matchers ...string) float64 {
		mt, err := scrape(wbase + "/metrics")
		if err != nil {
			return -1
		}
		return mt.sum(name, matchers...) - wm0.sum(name, matchers...)
	}
	// Every request has its answer: the rows are all there (a 503 may
	// have stored one too).
	stored := accepted
	if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM callback_log").Scan(&stored); err != nil {
		return false
	}
	if !waitFor(func() bool {
		return counter("callgate_callbacks_processed_total", `outcome="success"`)+counter("callgate_callbacks_processed_total", `outcome="failed"`) >= float64(max(stored, accepted))
	}) {
		return false
	}
	// Every notification's outbox row is written by the transaction that
	// processed its callback: they all exist now.
	var rows int
	if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox").Scan(&rows); err != nil {
		return false
	}
	if !waitFor(func() bool { return counter("callgate_outbox_published_total") >= float64(rows) }) {
		return false
	}
	if replica == nil {
		return true
	}
	var pos string
	if err := b.db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return false
	}
	return waitFor(func() bool {
		var applied string
		return replica.QueryRowContext(ctx, "SELECT @@gtid_slave_pos").Scan(&applied) == nil && applied == pos
	})
}

// costStatus reads costStatusVars of the benchmark's server (nil on error).
func (b *bench) costStatus() map[string]float64 { return readStatus(b.db, costStatusVars) }

// readStatus reads the global counters vars of a server (nil on error).
func readStatus(db *sql.DB, vars []string) map[string]float64 {
	rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('" + strings.Join(vars, "','") + "')")
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var k string
		var v float64
		if rows.Scan(&k, &v) == nil {
			out[k] = v
		}
	}
	if rows.Err() != nil {
		return nil
	}
	return out
}

// flushPages has InnoDB write its dirty pages now (max dirty pages 0
// until almost none is left; the setting is put back), so that the pages a window
// dirties are written, and counted, by the flush after it.
func (b *bench) flushPages(ctx context.Context) error {
	var was string
	if err := b.db.QueryRowContext(ctx, "SELECT @@innodb_max_dirty_pages_pct").Scan(&was); err != nil {
		return fmt.Errorf("cost: %w", err)
	}
	if _, err := b.db.ExecContext(ctx, "SET GLOBAL innodb_max_dirty_pages_pct = 0"); err != nil {
		return fmt.Errorf("cost: flushing the dirty pages: %w", err)
	}
	defer func() {
		if _, err := b.db.ExecContext(context.WithoutCancel(ctx), "SET GLOBAL innodb_max_dirty_pages_pct = "+was); err != nil {
			b.logf("cost: could not put innodb_max_dirty_pages_pct back to %s: %v", was, err)
		}
	}()
	// A few pages stay dirty while the gateway and the worker run (the
	// scheduler's lease, its jobs): under 50 (800 KB) is flushed enough.
	const enough = 50
	start := time.Now()
	last := start
	for ctx.Err() == nil && time.Since(start) < 5*time.Minute {
		var name string
		var dirty int
		if err := b.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'").Scan(&name, &dirty); err != nil {
			return fmt.Errorf("cost: %w", err)
		}
		if dirty < enough {
			return nil
		}
		if time.Since(last) >= 10*time.Second {
			b.logf("cost: flushing, %d pages still dirty", dirty)
			last = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("cost: dirty pages still there 5 minutes after innodb_max_dirty_pages_pct = 0")
}

// tableSizes returns costTables' rows, data and index bytes (statistics
// refreshed by ANALYZE TABLE first: information_schema reads InnoDB's
// persistent statistics, not the pages) and the allocated size of their
// .ibd files (every partition's).
func (b *bench) tableSizes(ctx context.Context) (map[string]tableSize, error) {
	out := map[string]tableSize{}
	for _, t := range costTables {
		if err := b.analyze(ctx, t); err != nil {
			return nil, err
		}
		var s tableSize
		err := b.db.QueryRowContext(ctx, `SELECT DATA_LENGTH, INDEX_LENGTH FROM information_schema.TABLES
			WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, b.dbName, t).Scan(&s.data, &s.index)
		if err != nil {
			return nil, fmt.Errorf("cost: the size of %s: %w", t, err)
		}
		if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t).Scan(&s.rows); err != nil {
			return nil, fmt.Errorf("cost: counting %s: %w", t, err)
		}
		// A partition's tablespace is <db>/<table>#P#<partition>.
		err = b.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(ALLOCATED_SIZE), 0) FROM information_schema.INNODB_SYS_TABLESPACES
			WHERE NAME = ? OR NAME LIKE ?`, b.dbName+"/"+t, b.dbName+"/"+t+"#P#%").Scan(&s.file)
		if err != nil {
			return nil, fmt.Errorf("cost: the files of %s: %w", t, err)
		}
		out[t] = s
	}
	return out, nil
}

// analyze runs ANALYZE TABLE t and reads its result set to the end.
func (b *bench) analyze(ctx context.Context, t string) error {
	rows, err := b.db.QueryContext(ctx, "ANALYZE TABLE "+t)
	if err != nil {
		return fmt.Errorf("cost: analyzing %s: %w", t, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	for i := range vals {
		vals[i] = new(sql.RawBytes)
	}
	for rows.Next() {
		if err := rows.Scan(vals...); err != nil {
			return err
		}
	}
	return rows.Err()
}

// histogram returns a scraped histogram's count and sum (0 when absent).
func histogram(m metricsText, name string) (count, sum float64) {
	fam := m[name]
	if fam == nil {
		return 0, 0
	}
	for _, mt := range fam.GetMetric() {
		if h := mt.GetHistogram(); h != nil {
			count += float64(h.GetSampleCount())
			sum += h.GetSampleSum()
		}
	}
	return count, sum
}

// checks are the phase's correctness checks.
func (c *Cost) checks() []Target {
	return []Target{
		{Name: "cost: every callback accepted, one row each", Met: c.Errors == 0 && c.RowsInDB == c.Accepted && c.Accepted == c.Callbacks,
			Goal: fmt.Sprintf("%d 200s and rows", c.Callbacks), Measured: fmt.Sprintf("%d 200s, %d errors, %d rows", c.Accepted, c.Errors, c.RowsInDB)},
		{Name: "cost: every callback SUCCESS, two notifications each, all SENT", Met: c.Done && c.Succeeded == c.RowsInDB && c.OutboxRows == 2*c.Succeeded && c.OutboxSent == c.OutboxRows,
			Goal:     fmt.Sprintf("%d SUCCESS, %d SENT", c.RowsInDB, 2*c.RowsInDB),
			Measured: fmt.Sprintf("%d SUCCESS, %d FAILED, %d PENDING; %d outbox rows, %d SENT", c.Succeeded, c.Failed, c.Pending, c.OutboxRows, c.OutboxSent)},
	}
}

// printCost writes the cost phase's figures.
func printCost(w io.Writer, c *Cost) {
	fmt.Fprintf(w, "\nCOST per callback: %s\n", c.What)
	fmt.Fprintf(w, "window %.1fs; %d accepted, %d processed (every figure below is per processed callback), %d SUCCESS; intake latency from scheduled send p50 %.1f ms, p99 %.1f ms, max %.1f ms (informational: a shared machine)\n",
		c.Window.WindowSeconds, c.Accepted, c.Processed, c.Succeeded, c.Latency.P50, c.Latency.P99, c.Latency.Max)
	fmt.Fprintf(w, "  %-12s %10s %14s %12s\n", "CPU ms", "gross", "net of idle", "idle %core")
	for _, name := range []string{"gateway", "worker", "mariadbd", "replica", "beam.smp", "loadgen"} {
		if _, ok := c.Window.Procs[name]; !ok {
			continue
		}
		fmt.Fprintf(w, "  %-12s %10.3f %14.3f %12.1f\n", name, c.CPUms[name], c.CPUmsNet[name], c.Idle.Procs[name].CPUPercent)
	}
	fmt.Fprintf(w, "  %-12s %10.3f %14s %12.1f   (everything on the machine, others' work included; other %.1fs, irq %.1fs)\n",
		"machine", c.CPUms["machine"], "-", c.Idle.MachineBusy.CPUPercent, c.Window.Other.CPUSeconds, c.Window.IRQ.CPUSeconds)
	if len(c.Window.OtherTop) > 0 {
		fmt.Fprintf(w, "  busiest other processes: %s\n", strings.Join(c.Window.OtherTop, ", "))
	}
	if c.Window.ForeignQueryPct > 0 {
		fmt.Fprintf(w, "  other databases' queries in MariaDB in %.0f%% of samples (%s): its figures include them\n",
			c.Window.ForeignQueryPct, strings.Join(c.Window.ForeignDBs, ", "))
	}
	d := c.MariaDB
	fmt.Fprintf(w, "  MariaDB: statements %.2f (SELECT %.2f, INSERT %.2f, UPDATE %.2f, DELETE %.2f, BEGIN %.2f, COMMIT %.2f), Handler_commit %.2f, rows read %.1f\n",
		d["Questions"], d["Com_select"], d["Com_insert"], d["Com_update"], d["Com_delete"], d["Com_begin"], d["Com_commit"], d["Handler_commit"], d["Rows_read"])
	binlog := "binlog off"
	if c.LogBin {
		binlog = fmt.Sprintf("binlog %.0f B (%s, binlog_row_image %s, sync_binlog %s; %.3f binlog group commits)",
			d["Binlog_bytes_written"], c.BinlogFormat, c.BinlogRowImage, c.SyncBinlog, d["Binlog_group_commits"])
	}
	data := "data files: pages not flushed in the window (-cost-flush counts them)"
	if c.Flushed {
		data = fmt.Sprintf("data files %.0f B (every dirty page flushed before and after)", c.DataWritten)
	}
	fmt.Fprintf(w, "  written: redo %.0f B (LSN; Innodb_os_log_written %.0f B), %s, %s; fsyncs %.3f\n",
		d["Innodb_lsn_current"], d["Innodb_os_log_written"], binlog, data, d["Innodb_data_fsyncs"])
	if i := c.Idle; i.WindowSeconds > 0 && i.MariaDB != nil {
		fmt.Fprintf(w, "  idle (gateway and worker up, nothing sent): %.1f statements/s, redo %.0f B/s, binlog %.0f B/s\n",
			i.MariaDB["Questions"]/i.WindowSeconds, i.MariaDB["Innodb_lsn_current"]/i.WindowSeconds, i.MariaDB["Binlog_bytes_written"]/i.WindowSeconds)
	}
	if r := c.Replica; r != nil {
		fmt.Fprintf(w, "  replica: redo %.0f B, binlog %.0f B (its own, log_slave_updates), statements %.2f, commits %.3f\n",
			r["Innodb_lsn_current"], r["Binlog_bytes_written"], r["Questions"], r["Handler_commit"])
	}
	per := func(v float64) float64 {
		if c.Processed == 0 {
			return 0
		}
		return v / float64(c.Processed)
	}
	fmt.Fprintf(w, "  broker: %.4f announcements (one per %.0f callbacks), %.4f by the worker, %.3f notifications; %d notifications parked unrouted\n",
		per(c.Announcements), safeDiv(float64(c.Processed), c.Announcements), per(c.WorkerAnnouncements), per(c.Notifications), c.Unrouted)
	fmt.Fprintf(w, "  worker: %.0f batch transactions, %.1f callbacks each; peak RSS gateway %.0f MB, worker %.0f MB\n",
		c.WorkerBatches, c.WorkerBatchMean, c.GatewayRSSMB, c.WorkerRSSMB)
	fmt.Fprintf(w, "  %-18s %10s %14s %14s %14s\n", "table", "rows", "rows/callback", "B/callback", "file B/callback")
	for _, t := range c.Tables {
		fmt.Fprintf(w, "  %-18s %10d %14.2f %14.0f %14.0f\n", t.Table, t.Rows, t.RowsPerCB, t.BytesPerCB, t.FileBytesPerCB)
	}
}

// safeDiv is a/b, 0 when b is 0.
func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
