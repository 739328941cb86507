// Command loadgen is callgate's benchmark. It starts from the built binaries
// (bin/gateway, bin/worker) and the running MariaDB and RabbitMQ, on a
// database and an AMQP prefix of its own that it removes at the end, and
// measures in one run, every throughput as a ratio to the run's own raw
// INSERT baseline:
//
//  1. baseline: one autocommit INSERT per callback straight from Go to MySQL
//     (the intake's statement, same table), N goroutines, no HTTP;
//  2. per-request: the gateway with mysql.group_commit false, no worker;
//  3. group: the intake alone, as shipped (group commit), no worker;
//  4. drain: the worker alone working off a backlog the intake prepared,
//     once with worker.batch_size 1 and once with the configured batch size;
//  5. open: gateway and worker together, signed callbacks at a fixed arrival
//     rate (a ratio of the baseline), latency from each request's scheduled
//     send time, backlog and processing lag;
//  6. sweep: the highest open-loop rate at which the intake p99 stays within
//     50 ms and the processing lag p99 within 2 s, both processes running.
//  7. cost: a fixed number of callbacks through gateway and worker, and what
//     each process, MariaDB (statements, redo, binlog, pages, tables) and
//     RabbitMQ spent per callback (cost.go, docs/capacity.md). Not run
//     unless named in -phases.
//
// Phases 2 and 3 are closed loops (N keep-alive clients); each verifies that
// callback_log holds exactly one row per 200 and that the log ids announced
// on <prefix>.payment are exactly those of the 200s. CPU seconds and peak
// RSS of the gateway, the worker, mariadbd, beam.smp and loadgen itself are
// read from /proc for each measured window.
//
// With -scale N (make bench-scale) it runs the phases twice, on empty
// tables and on tables loaded with N callbacks over -scale-days past
// days, then times retention at that size: the row-by-row DELETE
// callgate ran before day partitions against DROP PARTITION (scale.go).
//
//	go build -o bin/ ./cmd/... && bin/loadgen -json bench-latest.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	// serverSettings refuses a MariaDB with a smaller buffer pool or redo
	// log than make bench's server has; false measures it as it is
	// (server.go).
	serverSettings bool
	bin            string
	config         string
	jsonPath       string
	mysqlDSN       string
	amqpURL        string
	// amqpURLs, queueType and durability run the gateway and the worker
	// against replicated servers (make bench-ha): every node, quorum
	// queues, mysql.durability. Empty: the shipped settings and amqpURL.
	amqpURLs   string
	queueType  string
	durability string
	// dbMark and mqMark pick the MariaDB and RabbitMQ processes metered
	// (a text of their command lines): the replicated servers' primary
	// and first node rather than the standard ones.
	dbMark       string
	mqMark       string
	concurrency  int
	warmup       time.Duration
	duration     time.Duration
	rate         float64 // 0: openRatio x the baseline
	openRatio    float64
	openWarmup   time.Duration
	openDuration time.Duration
	arrivals     string
	openMaxConns int
	openWorker   bool
	payloadBytes int
	drainTimeout time.Duration
	// drain phase: backlog sizes (configured batch size, batch_size 1) and
	// the longest a drain may take.
	drainBacklog  int
	drain1Backlog int
	drainMax      time.Duration
	// sweep phase.
	sweepRatios []float64
	sweepWarmup time.Duration
	sweepStep   time.Duration
	sweepBisect bool
	announceBuf int
	logLevel    string
	reqTimeout  time.Duration
	phases      map[string]bool
	keep        bool
	strict      bool
	cpuProfile  string
	cost        costOptions
	// make bench-scale (scale.go): callbacks to load (0: the ordinary
	// run), over how many past days, with how many statements at once;
	// the retention phase's reference stretches, its longest wait for
	// purge after the DELETE, its longest open loop, and the old
	// retention's batch size.
	scale           int
	scaleDays       int
	scaleConns      int
	retentionRef    time.Duration
	retentionSettle time.Duration
	retentionMax    time.Duration
	retentionBatch  int
}

// defaultPhases run unless -phases says otherwise; allPhases adds those
// run only when named.
var (
	defaultPhases = []string{"baseline", "per-request", "group", "drain", "open", "sweep"}
	allPhases     = append(slices.Clone(defaultPhases), "cost")
)

// scalePhases are the phases of each round of -scale, and retention,
// which runs once, on the loaded tables.
var scalePhases = []string{"baseline", "group", "drain", "open", "retention"}

// scaleDrain1Backlog is -scale's batch_size 1 drain backlog, unless
// -drain1-backlog is given.
const scaleDrain1Backlog = 3000

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	var phases, sweepRatios string
	flag.StringVar(&o.bin, "bin", "./bin", "directory holding the gateway and worker binaries")
	flag.StringVar(&o.config, "config", "configs/callgate.yaml", "config file the benchmark's variants are derived from")
	flag.StringVar(&o.jsonPath, "json", "", "also write the figures as JSON to this file")
	flag.StringVar(&o.mysqlDSN, "mysql", "root:@tcp(127.0.0.1:3306)/", "MariaDB DSN (go-sql-driver form); its database name is replaced by the benchmark's own")
	flag.StringVar(&o.amqpURL, "amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ URL (the benchmark's own connection; the processes' too unless -amqp-urls)")
	flag.StringVar(&o.amqpURLs, "amqp-urls", "", "comma-separated RabbitMQ nodes the gateway and the worker dial (amqp.urls), e.g. a cluster's")
	flag.StringVar(&o.queueType, "queue-type", "", "amqp.queue_type of the gateway and the worker (classic, quorum); empty: the config file's")
	flag.StringVar(&o.durability, "durability", "", "mysql.durability of the gateway and the worker (primary, replica); empty: the config file's")
	flag.StringVar(&o.dbMark, "db-proc", "", "meter the mariadbd whose command line contains this (default: the lowest pid)")
	flag.StringVar(&o.mqMark, "mq-proc", "rabbit boot", "meter the beam.smp whose command line contains this")
	flag.IntVar(&o.concurrency, "concurrency", 64, "clients (closed-loop intake phases) and goroutines (baseline)")
	flag.DurationVar(&o.warmup, "warmup", 5*time.Second, "warm-up of each closed-loop phase, reported separately")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "measured time of each closed-loop phase")
	flag.Float64Var(&o.rate, "rate", 0, "open-loop arrival rate, requests per second (default: -open-ratio x the run's baseline)")
	flag.Float64Var(&o.openRatio, "open-ratio", 0.2, "open-loop arrival rate as a ratio of the run's raw INSERT baseline, when -rate is not given")
	flag.DurationVar(&o.openWarmup, "open-warmup", 5*time.Second, "open-loop warm-up, excluded from its figures")
	flag.DurationVar(&o.openDuration, "open-duration", 60*time.Second, "measured time of the open loop")
	flag.StringVar(&o.arrivals, "arrivals", "uniform", "open-loop arrivals: uniform or poisson")
	flag.BoolVar(&o.openWorker, "open-worker", true, "run the worker during the open loop (false: the intake alone, no end-to-end figures)")
	flag.IntVar(&o.openMaxConns, "open-max-conns", 2048, "open loop: most connections to the gateway at once (further requests wait, their wait counted)")
	flag.IntVar(&o.payloadBytes, "payload-bytes", 1024, "size of each callback body")
	flag.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "after the open loop's last send, how long to wait for the worker to finish the backlog")
	// Fixed sizes, so that every run does the same work on tables of the
	// same size: at least 15 s at the top of the rates expected on a
	// 2-core machine (1,500-3,000/s batched, 400-600/s with batch_size 1).
	flag.IntVar(&o.drainBacklog, "drain-backlog", 45000, "drain phase: callbacks in the backlog of the drain with the configured worker.batch_size")
	flag.IntVar(&o.drain1Backlog, "drain1-backlog", 9000, "drain phase: callbacks in the backlog of the drain with worker.batch_size 1")
	flag.DurationVar(&o.drainMax, "drain-max", 3*time.Minute, "drain phase: the longest a drain may take before it is reported not drained")
	flag.StringVar(&sweepRatios, "sweep-ratios", "0.1,0.2,0.3,0.4,0.6,0.8", "sweep phase: open-loop rates to try, as ratios of the baseline, rising; the sweep stops at the first failing one")
	flag.DurationVar(&o.sweepWarmup, "sweep-warmup", 5*time.Second, "sweep phase: warm-up of each step, excluded from its figures")
	flag.DurationVar(&o.sweepStep, "sweep-step", 20*time.Second, "sweep phase: measured time of each step")
	flag.BoolVar(&o.sweepBisect, "sweep-bisect", true, "sweep phase: after the first failing step, try once halfway between it and the last passing one")
	flag.IntVar(&o.announceBuf, "announce-buffer", 1000000, "amqp.announce_buffer of the closed-loop gateways (so every announcement can be verified); the open loop runs the shipped value")
	flag.StringVar(&o.logLevel, "log-level", "warn", "log.level of the gateway and worker")
	flag.DurationVar(&o.reqTimeout, "timeout", 10*time.Second, "HTTP request timeout (a timed-out request counts as an error)")
	flag.StringVar(&phases, "phases", strings.Join(defaultPhases, ","), "phases to run, of: "+strings.Join(allPhases, ","))
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the gateway over the group-commit phase's measured window to this file (needs the gateway's http.pprof_addr)")
	flag.BoolVar(&o.keep, "keep", false, "keep the database, the queues and the logs")
	flag.BoolVar(&o.serverSettings, "server-settings", true, "refuse a MariaDB with less buffer pool or redo log than scripts/services.sh configures when it installs it (make bench starts one of its own that has them: scripts/bench-db.sh); false: measure it as it is (loadgen never changes a server's settings)")
	o.cost.register()
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a project target is missed (correctness failures always exit 1)")
	flag.IntVar(&o.scale, "scale", 0, "make bench-scale: load this many callbacks (with their attempts, outbox rows and events) over -scale-days past days and run the phases on empty, then on loaded tables, then retention; 0: the ordinary benchmark")
	flag.IntVar(&o.scaleDays, "scale-days", 30, "-scale: the past UTC days the loaded callbacks are spread over, a partition each")
	flag.IntVar(&o.scaleConns, "scale-conns", 2, "-scale: load statements running at once")
	flag.DurationVar(&o.retentionRef, "retention-ref", 20*time.Second, "-scale: retention phase's reference stretches (before the DELETE, before and after DROP PARTITION)")
	flag.DurationVar(&o.retentionSettle, "retention-settle", time.Minute, "-scale: retention phase: the longest to wait after the DELETE for purge to catch up")
	flag.DurationVar(&o.retentionMax, "retention-max", 15*time.Minute, "-scale: retention phase: the longest its open loop may last (it ends when the steps are done)")
	flag.IntVar(&o.retentionBatch, "retention-batch", 500, "-scale: the old retention's batch size (scheduler.retention.batch_size as shipped)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "loadgen: unexpected arguments %q\n", flag.Args())
		return 2
	}
	if o.scale < 0 || (o.scale > 0 && (o.scaleDays < 2 || o.scale < o.scaleDays || o.scaleConns < 1 || o.retentionRef <= 0 || o.retentionMax <= 0 || o.retentionBatch < 1)) {
		fmt.Fprintf(os.Stderr, "loadgen: -scale must not be negative; with -scale: -scale-days at least 2 and at most -scale, -scale-conns, -retention-ref, -retention-max, -retention-batch positive\n")
		return 2
	}
	valid := allPhases
	if o.scale > 0 {
		valid = append(slices.Clone(allPhases), "retention")
		given := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["phases"] {
			phases = strings.Join(scalePhases, ",")
		}
		// The batch_size 1 drain is the slowest phase, and slower at
		// size: a smaller backlog keeps it within -drain-max and the
		// run short.
		if !given["drain1-backlog"] {
			o.drain1Backlog = scaleDrain1Backlog
		}
	}
	o.phases = map[string]bool{}
	for _, p := range strings.Split(phases, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(valid, p) {
			fmt.Fprintf(os.Stderr, "loadgen: unknown phase %q (want %s; retention with -scale only)\n", p, strings.Join(valid, ","))
			return 2
		}
		o.phases[p] = true
	}
	if o.arrivals != "uniform" && o.arrivals != "poisson" {
		fmt.Fprintf(os.Stderr, "loadgen: -arrivals must be uniform or poisson\n")
		return 2
	}
	if o.concurrency < 1 || o.rate < 0 || o.openRatio <= 0 || o.duration <= 0 || o.openDuration <= 0 || o.payloadBytes < 200 ||
		o.drainBacklog < 1 || o.drain1Backlog < 1 || o.drainMax <= 0 || o.sweepStep <= 0 {
		fmt.Fprintf(os.Stderr, "loadgen: -concurrency, -open-ratio, -duration, -open-duration, -drain-backlog, -drain1-backlog, -drain-max, -sweep-step must be positive, -rate not negative, -payload-bytes at least 200\n")
		return 2
	}
	var err error
	if o.sweepRatios, err = parseRatios(sweepRatios); err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: -sweep-ratios: %v\n", err)
		return 2
	}
	// The open loop's rate (unless -rate is given) and every sweep step are
	// ratios of the baseline: it runs first.
	if !o.phases["baseline"] && (o.phases["sweep"] || ((o.phases["open"] || o.phases["retention"]) && o.rate == 0)) {
		fmt.Fprintf(os.Stderr, "loadgen: adding the baseline phase: the open loop's rate and the sweep's steps are ratios of it\n")
		o.phases["baseline"] = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := newBench(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		return 1
	}
	if o.scale > 0 {
		return runScale(ctx, b)
	}
	rep, runErr := b.run(ctx)
	b.cleanup(runErr != nil)
	if rep != nil && rep.ran() {
		rep.evaluate()
		printReport(os.Stdout, rep)
		if o.jsonPath != "" {
			if err := writeJSON(o.jsonPath, rep); err != nil {
				fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
				return 1
			}
			b.logf("figures written to %s", o.jsonPath)
		}
	}
	if runErr != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", runErr)
		return 1
	}
	if !rep.ran() || !rep.CorrectnessOK {
		fmt.Fprintf(os.Stderr, "loadgen: correctness check failed (see the VERIFY lines)\n")
		return 1
	}
	if o.strict && !rep.AllTargetsMet {
		fmt.Fprintf(os.Stderr, "loadgen: project targets missed\n")
		return 1
	}
	return 0
}

// runScale is make bench-scale's run, report and exit code.
func runScale(ctx context.Context, b *bench) int {
	sr, runErr := b.runScale(ctx)
	b.cleanup(runErr != nil)
	sr.evaluate()
	printScale(os.Stdout, sr)
	if b.o.jsonPath != "" {
		if err := writeJSON(b.o.jsonPath, sr); err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
			return 1
		}
		b.logf("figures written to %s", b.o.jsonPath)
	}
	if runErr != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", runErr)
		return 1
	}
	if !sr.CorrectnessOK {
		fmt.Fprintf(os.Stderr, "loadgen: correctness check failed (see the VERIFY lines)\n")
		return 1
	}
	return 0
}
