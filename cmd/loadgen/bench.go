package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.yaml.in/yaml/v3"

	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/store"
)

// bench holds what every phase shares.
type bench struct {
	o       options
	runID   string
	dbName  string
	dsn     string // the benchmark database, as given (store normalizes it)
	prefix  string // AMQP prefix
	dir     string // configs and process logs
	db      *sql.DB
	amqp    *amqp.Connection
	secret  string // paydemo's signing secret
	source  string
	kind    string
	started time.Time
	// batchSize is the configured worker.batch_size (the drain's default).
	batchSize int
	// baselineRate: rows/s of the run's baseline (0 until it ran); every
	// phase's throughput is reported as a ratio to it.
	baselineRate float64

	// children still running, stopped by cleanup.
	children []*child
	// mariadbd and beam.smp, when found.
	mariadbPID, rabbitPID int
	// scale: make bench-scale's loaded tables (nil: the ordinary run).
	scale *scaleState

	createdDB bool
	// serverBelow: -server-settings=false and MariaDB has less than the
	// wanted settings (server.go).
	serverBelow bool
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(b.started).Seconds(), fmt.Sprintf(format, args...))
}

func newBench(ctx context.Context, o options) (*bench, error) {
	b := &bench{o: o, started: time.Now(), source: "paydemo"}
	var id [4]byte
	_, _ = rand.Read(id[:])
	b.runID = hex.EncodeToString(id[:])
	b.dbName = "callgate_bench_" + b.runID
	b.prefix = "callgate-bench-" + b.runID

	for _, name := range []string{"gateway", "worker"} {
		p := filepath.Join(o.bin, name)
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return nil, fmt.Errorf("%s not found: build it first (go build -o bin/ ./cmd/... or make build)", p)
		}
	}
	c, err := mysql.ParseDSN(o.mysqlDSN)
	if err != nil {
		return nil, fmt.Errorf("invalid -mysql: %w", err)
	}
	c.DBName = b.dbName
	b.dsn = c.FormatDSN()
	// Before anything is created: a server with less than the wanted
	// settings is refused (server.go).
	if b.serverBelow, err = b.checkServer(ctx); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "callgate-bench-"+b.runID+"-")
	if err != nil {
		return nil, err
	}
	b.dir = dir
	b.mariadbPID = findDB(b.o.dbMark)
	b.rabbitPID = findProc("beam.smp", b.o.mqMark)
	return b, nil
}

// run runs the phases and returns the report; on error the report holds
// what was measured so far.
func (b *bench) run(ctx context.Context) (*Report, error) {
	rep := newReport(b)
	if err := b.setup(ctx, rep); err != nil {
		return rep, err
	}
	err := b.runPhases(ctx, rep)
	rep.TotalSeconds = round(time.Since(b.started).Seconds(), 1)
	return rep, err
}

// runPhases runs the chosen phases, in order, into rep.
func (b *bench) runPhases(ctx context.Context, rep *Report) error {
	if b.o.phases["baseline"] {
		ph, err := b.baseline(ctx)
		rep.Baseline = ph
		if err != nil {
			return err
		}
		b.baselineRate = ph.Measured.OKPerSecond
	}
	if b.o.phases["per-request"] {
		ph, err := b.intakePhase(ctx, "per-request", "pr", false)
		rep.PerRequest = ph
		if err != nil {
			return err
		}
	}
	if b.o.phases["group"] {
		ph, err := b.intakePhase(ctx, "group", "gc", true)
		rep.Group = ph
		if err != nil {
			return err
		}
	}
	if b.o.phases["drain"] {
		for _, size := range []int{1, b.batchSize} {
			d, err := b.drain(ctx, size)
			rep.Drains = append(rep.Drains, d)
			if err != nil {
				return err
			}
		}
	}
	if b.o.phases["open"] {
		ol, e2e, err := b.openLoop(ctx)
		rep.OpenLoop, rep.EndToEnd = ol, e2e
		if err != nil {
			return err
		}
	}
	if b.o.phases["sweep"] {
		sw, err := b.sweep(ctx)
		rep.Sweep = sw
		if err != nil {
			return err
		}
	}
	if b.o.phases["cost"] {
		c, err := b.cost(ctx)
		rep.Cost = c
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) setup(ctx context.Context, rep *Report) error {
	// The signing secret, and a check that the config is valid before any
	// process starts.
	cfgPath, err := b.writeConfig("check", variant{groupCommit: true})
	if err != nil {
		return err
	}
	cfg, err := config.Load(cfgPath, kinds.Names())
	if err != nil {
		return fmt.Errorf("config %s (derived from %s): %w", cfgPath, b.o.config, err)
	}
	for _, s := range cfg.Sources {
		if s.Name == b.source {
			if len(s.Signature.Secrets) == 0 || s.Signature.Scheme != "standard-webhooks" {
				return fmt.Errorf("source %s must use standard-webhooks with a secret", b.source)
			}
			b.secret = s.Signature.Secrets[0]
			b.kind = s.Kind
		}
	}
	if b.secret == "" {
		return fmt.Errorf("%s has no source %q", b.o.config, b.source)
	}
	b.batchSize = cfg.Worker.WithDefaults().BatchSize
	rep.Settings.WorkerBatchSize = b.batchSize

	rep.Machine.ServerSettingsBelowWanted = b.serverBelow
	b.logf("database %s, AMQP prefix %s, logs in %s", b.dbName, b.prefix, b.dir)
	if _, err := store.CreateAndMigrate(b.dsn, 2*time.Second); err != nil {
		return fmt.Errorf("creating the benchmark database: %w", err)
	}
	b.createdDB = true
	norm, err := store.NormalizeDSN(b.dsn, 2*time.Second)
	if err != nil {
		return err
	}
	if b.db, err = sql.Open("mysql", norm); err != nil {
		return err
	}
	b.db.SetMaxOpenConns(4)
	b.db.SetMaxIdleConns(4)
	if b.amqp, err = amqp.DialConfig(b.o.amqpURL, amqp.Config{Properties: amqp.Table{"connection_name": "callgate-loadgen"}}); err != nil {
		return fmt.Errorf("connecting to RabbitMQ: %w", err)
	}

	rep.Machine.MariaDB = b.queryString(ctx, "SELECT VERSION()")
	rep.Machine.InnoDBFlushLogAtTrxCommit = b.queryString(ctx, "SELECT @@innodb_flush_log_at_trx_commit")
	rep.Machine.InnoDBBufferPoolMB = b.queryString(ctx, "SELECT @@innodb_buffer_pool_size DIV 1048576")
	rep.Machine.InnoDBLogFileMB = b.queryString(ctx, "SELECT @@innodb_log_file_size DIV 1048576")
	if v, ok := b.amqp.Properties["version"].(string); ok {
		rep.Machine.RabbitMQ = v
	}
	busy := machineBusyNow(time.Second)
	rep.Machine.BusyBeforeStartPct = busy
	if busy > 20 {
		b.logf("WARNING: the machine was %.0f%% busy (of one core) in the second before the start: the figures will be noisy", busy)
	}
	return nil
}

func (b *bench) queryString(ctx context.Context, q string) string {
	var s string
	if err := b.db.QueryRowContext(ctx, q).Scan(&s); err != nil {
		return ""
	}
	return s
}

// orderCode and orderAmount define the n-th order, and the payload that pays it.
func orderCode(n int) string  { return fmt.Sprintf("BO%09d", n) }
func orderAmount(n int) int64 { return 1000 + int64(n%9000) }

// freshOrders replaces the orders table by orders 0..n-1, all UNPAID, and
// empties their payment facts (an order's money is derived from them: a
// payment fact left by an earlier phase is "already recorded" and
// publishes nothing), so that each phase with a worker pays orders nobody
// paid before on a table of the same size.
func (b *bench) freshOrders(ctx context.Context, n int) error {
	t := time.Now()
	for _, table := range []string{"orders", "payment_facts"} {
		if _, err := b.db.ExecContext(ctx, "TRUNCATE TABLE "+table); err != nil {
			return fmt.Errorf("truncating %s: %w", table, err)
		}
	}
	if err := b.createOrders(ctx, n); err != nil {
		return err
	}
	b.logf("created %d orders in %.1fs", n, time.Since(t).Seconds())
	return nil
}

// createOrders inserts orders 0..n-1 in multi-row INSERTs.
func (b *bench) createOrders(ctx context.Context, n int) error {
	const chunk = 5000
	var q strings.Builder
	for start := 0; start < n; start += chunk {
		q.Reset()
		q.WriteString("INSERT INTO orders (order_code, user_id, amount) VALUES ")
		for i := start; i < min(start+chunk, n); i++ {
			if i > start {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "('%s',%d,%d)", orderCode(i), 1+i%100000, orderAmount(i))
		}
		if _, err := b.db.ExecContext(ctx, q.String()); err != nil {
			return fmt.Errorf("creating orders: %w", err)
		}
	}
	return nil
}

// variant is what a phase changes in the shipped config.
type variant struct {
	groupCommit    bool
	announceBuffer int // 0: as shipped
	batchSize      int // worker.batch_size; 0: as shipped
	httpAddr       string
	metricsAddr    string
	pprofAddr      string
}

// writeConfig derives a YAML from -config with the benchmark's database,
// broker prefix, addresses and the variant's settings, and returns its path.
// ${VAR} references are kept as they are (config expands them).
func (b *bench) writeConfig(name string, v variant) (string, error) {
	raw, err := os.ReadFile(b.o.config)
	if err != nil {
		return "", fmt.Errorf("reading -config: %w (run from the repository root, or pass -config)", err)
	}
	var tree map[string]any
	err = yaml.Unmarshal(raw, &tree)
	if err != nil {
		return "", fmt.Errorf("parsing %s: %w", b.o.config, err)
	}
	set := func(path string, val any) {
		keys := strings.Split(path, ".")
		m := tree
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = val
	}
	set("mysql.dsn", b.dsn)
	set("mysql.group_commit", v.groupCommit)
	if b.o.amqpURLs != "" {
		set("amqp.urls", strings.Split(b.o.amqpURLs, ","))
		if amqpSection, ok := tree["amqp"].(map[string]any); ok {
			delete(amqpSection, "url")
		}
	} else {
		set("amqp.url", b.o.amqpURL)
	}
	if b.o.queueType != "" {
		set("amqp.queue_type", b.o.queueType)
	}
	if b.o.durability != "" {
		set("mysql.durability", b.o.durability)
	}
	set("amqp.prefix", b.prefix)
	if v.announceBuffer > 0 {
		set("amqp.announce_buffer", v.announceBuffer)
	}
	if v.batchSize > 0 {
		set("worker.batch_size", v.batchSize)
	}
	set("log.level", b.o.logLevel)
	if v.httpAddr != "" {
		set("http.addr", v.httpAddr)
	}
	if v.pprofAddr != "" {
		set("http.pprof_addr", v.pprofAddr)
	}
	if v.metricsAddr != "" {
		set("worker.metrics_addr", v.metricsAddr)
	} else {
		set("worker.metrics_addr", "off")
	}
	set("worker.id", "bench-worker-"+b.runID)
	if b.scale != nil {
		// The loaded days are the retention phase's to remove, and the
		// phases' to meet as loaded: no retention in the worker.
		set("scheduler.retention.max_age", "0s")
	}
	out, err := yaml.Marshal(tree)
	if err != nil {
		return "", err
	}
	out = append([]byte("# Written by cmd/loadgen from "+b.o.config+" for run "+b.runID+".\n"), out...)
	path := filepath.Join(b.dir, name+".yaml")
	return path, os.WriteFile(path, out, 0o600)
}

// childEnv is our environment without CALLGATE_* (the benchmark's config
// file says everything), plus the overrides that pin the run's resources.
func (b *bench) childEnv(httpAddr string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CALLGATE_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"CALLGATE_MYSQL_DSN="+b.dsn,
		b.amqpEnv(),
		"CALLGATE_AMQP_PREFIX="+b.prefix,
		"CALLGATE_HTTP_ADDR="+httpAddr,
		"CALLGATE_DEMO=1",           // the benchmark signs with the demo sources' secrets
		"CALLGATE_METRICS_PUBLIC=1", // and scrapes the gateway's /metrics
	)
}

// amqpEnv is the broker override of the processes' environment: the
// cluster's nodes with -amqp-urls, else the one URL.
func (b *bench) amqpEnv() string {
	if b.o.amqpURLs != "" {
		return "CALLGATE_AMQP_URLS=" + b.o.amqpURLs
	}
	return "CALLGATE_AMQP_URL=" + b.o.amqpURL
}

// startGateway starts bin/gateway with a config variant and waits for /readyz.
func (b *bench) startGateway(ctx context.Context, name string, v variant) (*child, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	v.httpAddr = fmt.Sprintf("127.0.0.1:%d", port)
	cfg, err := b.writeConfig(name, v)
	if err != nil {
		return nil, "", err
	}
	c, err := startChild("gateway ("+name+")", filepath.Join(b.o.bin, "gateway"), []string{"-config", cfg, "serve"},
		b.childEnv(v.httpAddr), filepath.Join(b.dir, name+".log"))
	if err != nil {
		return nil, "", err
	}
	b.children = append(b.children, c)
	base := "http://" + v.httpAddr
	if err := waitHTTP(ctx, base+"/readyz", c, 30*time.Second); err != nil {
		c.stop(5 * time.Second)
		return nil, "", err
	}
	return c, base, nil
}

// startWorker starts bin/worker with a config variant (name names its
// config and log) and waits until its metrics answer and its payment
// consumer is attached.
func (b *bench) startWorker(ctx context.Context, name string, v variant) (*child, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	v.groupCommit, v.metricsAddr = true, addr
	cfg, err := b.writeConfig(name, v)
	if err != nil {
		return nil, "", err
	}
	gwPort, err := freePort() // unused by the worker; keeps CALLGATE_HTTP_ADDR harmless
	if err != nil {
		return nil, "", err
	}
	c, err := startChild("worker ("+name+")", filepath.Join(b.o.bin, "worker"), []string{"-config", cfg},
		b.childEnv(fmt.Sprintf("127.0.0.1:%d", gwPort)), filepath.Join(b.dir, name+".log"))
	if err != nil {
		return nil, "", err
	}
	b.children = append(b.children, c)
	base := "http://" + addr
	if err := waitHTTP(ctx, base+"/healthz", c, 30*time.Second); err != nil {
		c.stop(5 * time.Second)
		return nil, "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, consumers, err := b.queueDepth(b.queue())
		if err == nil && consumers > 0 {
			break
		}
		if time.Now().After(deadline) || c.exited() {
			c.stop(5 * time.Second)
			return nil, "", fmt.Errorf("worker did not attach to %s within 30s; its log (%s) ends:\n%s", b.queue(), c.logPath, c.logTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c, base, nil
}

func (b *bench) queue() string { return b.prefix + "." + b.kind }

// unroutedQueue keeps the worker's downstream notifications: nobody binds
// a queue to <prefix>.downstream in the benchmark, so they all land here
// (the alternate exchange), persisted like delivered ones.
func (b *bench) unroutedQueue() string { return b.prefix + ".downstream.unrouted" }

// takeUnrouted returns how many notifications the unrouted queue holds and
// empties it, so that every phase starts with the broker in the same state
// (0 when the queue does not exist yet).
func (b *bench) takeUnrouted() (int, error) {
	n, _, err := b.queueDepth(b.unroutedQueue())
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return n, b.purge(b.unroutedQueue())
}

// queueDepth returns the messages ready in a queue and its consumers.
func (b *bench) queueDepth(name string) (messages, consumers int, err error) {
	ch, err := b.amqp.Channel()
	if err != nil {
		return 0, 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil {
		return 0, 0, err
	}
	return q.Messages, q.Consumers, nil
}

func (b *bench) purge(name string) error {
	ch, err := b.amqp.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	_, err = ch.QueuePurge(name, false)
	return err
}

// cleanup stops what is still running and removes the database, the
// queues and exchanges and, unless kept, the logs.
func (b *bench) cleanup(failed bool) {
	for _, c := range b.children {
		c.stop(15 * time.Second)
	}
	if b.o.keep {
		b.logf("kept: database %s, AMQP prefix %s, configs and logs in %s", b.dbName, b.prefix, b.dir)
		return
	}
	if b.amqp != nil {
		if ch, err := b.amqp.Channel(); err == nil {
			for _, k := range kinds.Names() {
				_, _ = ch.QueueDelete(b.prefix+"."+k, false, false, false)
			}
			_, _ = ch.QueueDelete(b.unroutedQueue(), false, false, false)
			_ = ch.ExchangeDelete(b.prefix+".callbacks", false, false)
			_ = ch.ExchangeDelete(b.prefix+".downstream", false, false)
			_ = ch.ExchangeDelete(b.prefix+".downstream.unrouted", false, false)
			ch.Close()
		}
		b.amqp.Close()
	}
	if b.db != nil {
		b.db.Close()
	}
	if b.createdDB {
		if err := dropDatabase(b.o.mysqlDSN, b.dbName); err != nil {
			b.logf("could not drop %s: %v", b.dbName, err)
		}
	}
	if failed {
		b.logf("configs and process logs kept in %s", b.dir)
		return
	}
	_ = os.RemoveAll(b.dir)
}

func dropDatabase(serverDSN, name string) error {
	c, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return err
	}
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec("DROP DATABASE IF EXISTS `" + strings.ReplaceAll(name, "`", "``") + "`")
	return err
}
