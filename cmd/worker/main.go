// Command worker processes the callbacks the gateway accepted.
//
//	worker [-config PATH]   consume, process, publish downstream
//	worker replay ...       replay callbacks through the gateway's admin API
//	                        (worker replay -h)
//	worker [-config PATH] tail [--routing-key PATTERN]
//	                        print the notifications published downstream
//	                        until Ctrl-C (worker tail -h)
//	worker [-config PATH] reconcile --order CODE
//	                        ask the order's platform now and print what it
//	                        says and what was stored
//
// Every setting can also come from the environment (CALLGATE_CONFIG,
// CALLGATE_MYSQL_DSN, CALLGATE_AMQP_URL, ...); see README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"callgate/internal/admincli"
	"callgate/internal/broker"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/logging"
	"callgate/internal/shutdown"
	"callgate/internal/store"
	"callgate/internal/tail"
	"callgate/internal/worker"
)

func main() {
	// The live heap is small (tens of MB) and mostly short-lived: at Go's
	// default GOGC=100 the collector ran so often that it cost a fifth of
	// the worker's CPU (BENCHMARKS.md). GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

// gcPercent is the collector's target when GOGC is not set.
const gcPercent = 300

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", config.PathFromEnv(), "config file (env "+config.EnvConfigPath+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: worker [-config PATH] [replay ... | tail ... | reconcile --order CODE]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 && fs.Arg(0) == "replay" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return admincli.Replay(ctx, fs.Args()[1:], os.Stdout, stderr)
	}
	if sub := fs.Arg(0); sub == "tail" || sub == "reconcile" {
		cfg, err := config.Load(*path, kinds.Names())
		if err != nil {
			fmt.Fprintf(stderr, "worker: %s: %v\n", *path, err)
			return 1
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if sub == "reconcile" {
			return worker.ReconcileCommand(ctx, cfg.WorkerSettings(), kinds.Names(), fs.Args()[1:], os.Stdout, stderr, logging.New(cfg.Log, stderr))
		}
		downstream := broker.Topology{Prefix: cfg.AMQP.Prefix}.DownstreamExchange()
		return tail.Command(ctx, fs.Args()[1:], cfg.AMQP.Nodes(), downstream, os.Stdout, stderr)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "worker: unknown subcommand %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*path, kinds.Names())
	if err != nil {
		fmt.Fprintf(stderr, "worker: %s: %v\n", *path, err)
		return 1
	}
	reg := kinds.Registry(cfg.WorkerSettings())
	log := logging.New(cfg.Log, stderr)
	store.SetDriverLogger(log)

	ctx, stop := shutdown.OnSignal(log, "worker")
	defer stop()
	if err := worker.Run(ctx, cfg.WorkerSettings(), reg, log, worker.Options{Hooks: faultHooks(log)}); err != nil {
		log.Error("worker: stopped with error", "error", err)
		return 1
	}
	return 0
}
