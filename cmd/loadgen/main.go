// Command loadgen is callgate's benchmark. It starts from the built binaries
// (bin/gateway, bin/worker) and the running MariaDB and RabbitMQ, on a
// database and an AMQP prefix of its own that it removes at the end, and
// measures in one run:
//
//  1. baseline: one autocommit INSERT per callback straight from Go to MySQL
//     (the intake's statement, same table), N goroutines, no HTTP;
//  2. per-request intake: the gateway with mysql.group_commit false;
//  3. group-committed intake: the gateway as shipped;
//  4. open loop: signed callbacks at a fixed arrival rate, latency from each
//     request's scheduled send time, with the worker running;
//  5. end to end: what the worker made of the open-loop load (processed/s,
//     drain time, processing lag, downstream publishes).
//
// Phases 2 and 3 are closed loops (N keep-alive clients); each verifies that
// callback_log holds exactly one row per 200 and that every announcement
// reached <prefix>.payment. CPU seconds and peak RSS of the gateway, the
// worker, mariadbd, beam.smp and loadgen itself are read from /proc for each
// measured window.
//
//	go build -o bin/ ./cmd/... && bin/loadgen -json bench-latest.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type options struct {
	bin          string
	config       string
	jsonPath     string
	mysqlDSN     string
	amqpURL      string
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
	announceBuf  int
	logLevel     string
	reqTimeout   time.Duration
	phases       map[string]bool
	keep         bool
	strict       bool
	cpuProfile   string
}

var allPhases = []string{"baseline", "per-request", "group", "open"}

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	var phases string
	flag.StringVar(&o.bin, "bin", "./bin", "directory holding the gateway and worker binaries")
	flag.StringVar(&o.config, "config", "configs/callgate.yaml", "config file the benchmark's variants are derived from")
	flag.StringVar(&o.jsonPath, "json", "", "also write the figures as JSON to this file")
	flag.StringVar(&o.mysqlDSN, "mysql", "root:@tcp(127.0.0.1:3306)/", "MariaDB DSN (go-sql-driver form); its database name is replaced by the benchmark's own")
	flag.StringVar(&o.amqpURL, "amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ URL")
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
	flag.IntVar(&o.announceBuf, "announce-buffer", 1000000, "amqp.announce_buffer of the closed-loop gateways (so every announcement can be verified); the open loop runs the shipped value")
	flag.StringVar(&o.logLevel, "log-level", "warn", "log.level of the gateway and worker")
	flag.DurationVar(&o.reqTimeout, "timeout", 10*time.Second, "HTTP request timeout (a timed-out request counts as an error)")
	flag.StringVar(&phases, "phases", strings.Join(allPhases, ","), "phases to run: "+strings.Join(allPhases, ","))
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the gateway over the group-commit phase's measured window to this file (needs the gateway's http.pprof_addr)")
	flag.BoolVar(&o.keep, "keep", false, "keep the database, the queues and the logs")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a project target is missed (correctness failures always exit 1)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "loadgen: unexpected arguments %q\n", flag.Args())
		return 2
	}
	o.phases = map[string]bool{}
	for _, p := range strings.Split(phases, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		ok := false
		for _, q := range allPhases {
			ok = ok || p == q
		}
		if !ok {
			fmt.Fprintf(os.Stderr, "loadgen: unknown phase %q (want %s)\n", p, strings.Join(allPhases, ","))
			return 2
		}
		o.phases[p] = true
	}
	if o.arrivals != "uniform" && o.arrivals != "poisson" {
		fmt.Fprintf(os.Stderr, "loadgen: -arrivals must be uniform or poisson\n")
		return 2
	}
	if o.concurrency < 1 || o.rate < 0 || o.openRatio <= 0 || o.duration <= 0 || o.openDuration <= 0 || o.payloadBytes < 200 {
		fmt.Fprintf(os.Stderr, "loadgen: -concurrency, -open-ratio, -duration, -open-duration must be positive, -rate not negative, -payload-bytes at least 200\n")
		return 2
	}
	// The open loop's rate, unless -rate is given, is a ratio of the
	// baseline: it runs first.
	if !o.phases["baseline"] && o.phases["open"] && o.rate == 0 {
		fmt.Fprintf(os.Stderr, "loadgen: adding the baseline phase: the open loop's rate is a ratio of it\n")
		o.phases["baseline"] = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := newBench(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		return 1
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
