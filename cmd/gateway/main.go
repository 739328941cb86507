// Command gateway receives callbacks from platforms over HTTP.
//
//	gateway [-config PATH] [serve]   serve HTTP (default)
//	gateway [-config PATH] migrate   apply the database migrations and exit
//
// Every setting can also come from the environment (CALLGATE_CONFIG,
// CALLGATE_MYSQL_DSN, CALLGATE_AMQP_URL, ...); see README.md.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"callgate/internal/config"
	"callgate/internal/gateway"
	"callgate/internal/kinds"
	"callgate/internal/logging"
	"callgate/internal/shutdown"
	"callgate/internal/store"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", config.PathFromEnv(), "config file (env "+config.EnvConfigPath+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: gateway [-config PATH] [serve|migrate]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cmd := "serve"
	if fs.NArg() > 0 {
		cmd = fs.Arg(0)
	}
	if cmd != "serve" && cmd != "migrate" {
		fmt.Fprintf(stderr, "gateway: unknown subcommand %q\n", cmd)
		fs.Usage()
		return 2
	}

	cfg, err := config.Load(*path, kinds.Names())
	if err != nil {
		fmt.Fprintf(stderr, "gateway: %s: %v\n", *path, err)
		return 1
	}
	log := logging.New(cfg.Log, stderr)
	store.SetDriverLogger(log)

	if cmd == "migrate" {
		v, err := store.Migrate(cfg.MySQL.DSN, cfg.MySQL.DialTimeout)
		if err != nil {
			log.Error("gateway: migrate failed", "error", err)
			return 1
		}
		log.Info("gateway: schema up to date", "version", v)
		return 0
	}

	ctx, stop := shutdown.OnSignal(log, "gateway")
	defer stop()
	if err := gateway.Run(ctx, cfg, log, nil); err != nil {
		log.Error("gateway: stopped with error", "error", err)
		return 1
	}
	log.Info("gateway: stopped")
	return 0
}
