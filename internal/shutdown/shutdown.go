// Package shutdown turns SIGTERM and SIGINT into a cancelled context for a
// graceful stop, and a second signal into an immediate exit.
package shutdown

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// OnSignal returns a context cancelled by the first SIGTERM or SIGINT. A
// second signal exits the process at once with status 1 (what the first
// stop had not finished is safe by design: rows are committed before any
// answer, and unacked messages return to the broker).
func OnSignal(log *slog.Logger, process string) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		// Listen for the second signal before giving up the first
		// handler, so none arrives while the default action is in place.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		stop()
		<-sig
		log.Warn(process + ": second signal, exiting now")
		os.Exit(1)
	}()
	return ctx, stop
}
