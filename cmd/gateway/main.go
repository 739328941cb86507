// Command gateway receives callbacks from platforms over HTTP.
//
//	gateway [-config PATH] [serve]   serve HTTP (default)
//	gateway [-config PATH] migrate [--create]
//	                                 apply the database migrations and exit;
//	                                 --create first creates the database
//	                                 mysql.dsn names if it does not exist
//	                                 (without it, a missing database is an
//	                                 error: a mistyped name is not created)
//
// -config may also follow the subcommand (gateway migrate -config PATH);
// any other argument is refused with the usage line (exit status 2).
//
// Every setting can also come from the environment (CALLGATE_CONFIG,
// CALLGATE_MYSQL_DSN, CALLGATE_AMQP_URL, ...); see docs/configuration.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

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

const usage = "usage: gateway [-config PATH] [serve|migrate [--create]] [-config PATH]"

func run(args []string, stderr io.Writer) int {
	path := config.PathFromEnv()
	create := false
	// The flags are read before the subcommand and again after it.
	parse := func(name string, args []string) ([]string, bool) {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.StringVar(&path, "config", path, "config file (env "+config.EnvConfigPath+")")
		if name == "gateway migrate" {
			fs.BoolVar(&create, "create", false, "create the database mysql.dsn names when it does not exist")
		}
		fs.Usage = func() {
			fmt.Fprintln(stderr, usage)
			fs.PrintDefaults()
		}
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		return fs.Args(), true
	}
	rest, ok := parse("gateway", args)
	if !ok {
		return 2
	}
	cmd := "serve"
	if len(rest) > 0 {
		cmd = rest[0]
		if rest, ok = parse("gateway "+cmd, rest[1:]); !ok {
			return 2
		}
	}
	if cmd != "serve" && cmd != "migrate" {
		fmt.Fprintf(stderr, "gateway: unknown subcommand %q\n", cmd)
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "gateway: unexpected argument %q after %s\n", rest[0], cmd)
		fmt.Fprintln(stderr, usage)
		return 2
	}

	cfg, err := config.Load(path, kinds.Names())
	if err != nil {
		printErrors(stderr, "gateway", err)
		return 1
	}
	log := logging.New(cfg.Log, stderr)
	store.SetDriverLogger(log)

	if cmd == "migrate" {
		migrate := store.Migrate
		if create {
			migrate = store.CreateAndMigrate
		}
		v, err := migrate(cfg.MySQL.DSN, cfg.MySQL.DialTimeout)
		if ae := store.AsAccessError(err, cfg.MySQL.DSN); ae != nil {
			return startFailed(log, path, ae)
		}
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
		return startFailed(log, path, err)
	}
	log.Info("gateway: stopped")
	return 0
}

// startFailed logs why the gateway stopped, with exit status 1: a
// setting's fault (MySQL or RabbitMQ refusing what the DSN or the URL
// names, an address already in use) in one line that names the setting
// and where its value came from, never a password.
func startFailed(log *slog.Logger, path string, err error) int {
	var se config.SettingError
	if errors.As(err, &se) {
		log.Error("gateway: "+config.Blame(path, err), "setting", se.Setting())
		return 1
	}
	log.Error("gateway: stopped with error", "error", err)
	return 1
}

// printErrors writes each line of err (config.Load reports one problem a
// line) after the command's name.
func printErrors(w io.Writer, prog string, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "%s: %s\n", prog, line)
	}
}
