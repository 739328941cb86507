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
// -config may also follow the subcommand (worker tail -config PATH ...);
// any other argument the subcommand does not take is refused with its
// usage line (exit status 2).
//
// Every setting can also come from the environment (CALLGATE_CONFIG,
// CALLGATE_MYSQL_DSN, CALLGATE_AMQP_URL, ...); see docs/configuration.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"callgate/internal/admincli"
	"callgate/internal/broker"
	"callgate/internal/config"
	"callgate/internal/demo"
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

const usage = "usage: worker [-config PATH] [replay ... | tail ... | reconcile --order CODE] (-config may also follow the subcommand)"

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", config.PathFromEnv(), "config file (env "+config.EnvConfigPath+")")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	explicit := false // -config given, not only CALLGATE_CONFIG or the default
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
	sub := fs.Arg(0)
	var subArgs []string
	if sub != "" {
		p, rest, err := takeConfigFlag(fs.Args()[1:])
		if err != nil {
			fmt.Fprintf(stderr, "worker %s: %v\n", sub, err)
			fmt.Fprintln(stderr, usage)
			return 2
		}
		if p != "" {
			*path, explicit = p, true
		}
		subArgs = rest
	}
	switch sub {
	case "replay":
		// replay talks to the gateway, not to the database: a config file
		// named with -config gives its address and admin.token.
		var d admincli.Defaults
		if explicit {
			cfg, err := config.Load(*path, kinds.Names())
			if err != nil {
				printErrors(stderr, "worker", err)
				return 1
			}
			d = admincli.Defaults{URL: adminURL(cfg.HTTP), Token: cfg.Admin.Token, DemoToken: cfg.Admin.Token == demo.AdminToken}
		}
		if d.Token == "" {
			// What `make run` starts accepts it; another gateway refuses
			// it, and the CLI then says to set CALLGATE_ADMIN_TOKEN.
			d.Token, d.DemoToken = demo.AdminToken, true
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return admincli.ReplayWith(ctx, d, subArgs, os.Stdout, stderr)
	case "tail", "reconcile":
		cfg, err := config.Load(*path, kinds.Names())
		if err != nil {
			printErrors(stderr, "worker", err)
			return 1
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if sub == "reconcile" {
			return worker.ReconcileCommand(ctx, cfg.WorkerSettings(), kinds.Names(), subArgs, os.Stdout, stderr, logging.New(cfg.Log, stderr))
		}
		downstream := broker.Topology{Prefix: cfg.AMQP.Prefix}.DownstreamExchange()
		return tail.Command(ctx, subArgs, cfg.AMQP.Nodes(), downstream, os.Stdout, stderr)
	case "":
	default:
		fmt.Fprintf(stderr, "worker: unknown subcommand %q\n", sub)
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*path, kinds.Names())
	if err != nil {
		printErrors(stderr, "worker", err)
		return 1
	}
	reg := kinds.Registry(cfg.WorkerSettings())
	log := logging.New(cfg.Log, stderr)
	store.SetDriverLogger(log)

	ctx, stop := shutdown.OnSignal(log, "worker")
	defer stop()
	if err := worker.Run(ctx, cfg.WorkerSettings(), reg, log, worker.Options{Hooks: faultHooks(log)}); err != nil {
		// A setting's fault (MySQL or RabbitMQ refusing what the DSN or
		// the URL names, worker.metrics_addr in use) is one line naming
		// the setting and where its value came from, never a password.
		var se config.SettingError
		if errors.As(err, &se) {
			log.Error("worker: "+config.Blame(*path, err), "setting", se.Setting())
			return 1
		}
		log.Error("worker: stopped with error", "error", err)
		return 1
	}
	return 0
}

// takeConfigFlag removes -config PATH (or --config PATH, -config=PATH)
// from the arguments after a subcommand, which then parses the rest
// with its own flags. It returns "" when there is none. It stops at "--"
// and does not know the subcommand's flags, so a value that is itself
// "-config" (--reason -config) would be taken for it.
func takeConfigFlag(args []string) (path string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return path, append(rest, args[i:]...), nil
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("flag needs an argument: %s", a)
			}
			i++
			value = args[i]
		}
		if value == "" {
			return "", nil, fmt.Errorf("%s: empty path", a)
		}
		path = value
	}
	return path, rest, nil
}

// adminURL is the base URL of the gateway's admin API on this machine:
// http.admin_addr, or http.addr, with a wildcard host as 127.0.0.1.
func adminURL(h config.HTTP) string {
	addr := h.AdminAddr
	if addr == "" {
		addr = h.Addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	scheme := "http"
	if h.TLSCertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// printErrors writes each line of err (config.Load reports one problem a
// line) after the command's name.
func printErrors(w io.Writer, prog string, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "%s: %s\n", prog, line)
	}
}
