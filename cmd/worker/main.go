// Command worker processes the callbacks the gateway accepted.
//
//	worker [-config PATH]   consume, process, publish downstream
//	worker replay ...       replay callbacks through the gateway's admin API
//	                        (worker replay -h)
//	worker [-config PATH] tail [--routing-key PATTERN]
//	                        print the notifications published downstream
//	                        until Ctrl-C (worker tail -h)
//
// Every setting can also come from the environment (CALLGATE_CONFIG,
// CALLGATE_MYSQL_DSN, CALLGATE_AMQP_URL, ...); see README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
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
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", config.PathFromEnv(), "config file (env "+config.EnvConfigPath+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: worker [-config PATH] [replay ... | tail ...]\n")
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
	if fs.NArg() > 0 && fs.Arg(0) == "tail" {
		cfg, err := config.Load(*path, kinds.Names())
		if err != nil {
			fmt.Fprintf(stderr, "worker: %s: %v\n", *path, err)
			return 1
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		downstream := broker.Topology{Prefix: cfg.AMQP.Prefix}.DownstreamExchange()
		return tail.Command(ctx, fs.Args()[1:], cfg.AMQP.URL, downstream, os.Stdout, stderr)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "worker: unknown subcommand %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	reg := kinds.Registry()
	cfg, err := config.Load(*path, reg.Kinds())
	if err != nil {
		fmt.Fprintf(stderr, "worker: %s: %v\n", *path, err)
		return 1
	}
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

// faultHooks reads the fault-injection switches the fault tests use to kill
// this process at the worst moments. Unset (always, in production) they do
// nothing:
//
//	CALLGATE_FAULT_KILL_AFTER_COMMIT=N  SIGKILL right after the N-th commit,
//	                                    before the outbox publish and the ack
//	CALLGATE_FAULT_KILL_BEFORE_ACK=N    SIGKILL after the N-th callback's
//	                                    outbox publish, before its ack
func faultHooks(log *slog.Logger) worker.Hooks {
	killAfter := func(env string) func(int64) {
		n, err := strconv.Atoi(os.Getenv(env))
		if err != nil || n <= 0 {
			return nil
		}
		var count atomic.Int64
		return func(logID int64) {
			if count.Add(1) == int64(n) {
				log.Warn("worker: fault injection, killing myself", "switch", env, "log_id", logID)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
	}
	return worker.Hooks{
		AfterCommit: killAfter("CALLGATE_FAULT_KILL_AFTER_COMMIT"),
		BeforeAck:   killAfter("CALLGATE_FAULT_KILL_BEFORE_ACK"),
	}
}
