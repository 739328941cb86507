package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"callgate/internal/broker"
	"callgate/internal/ingest"
	"callgate/internal/metrics"
	"callgate/internal/platform"
	"callgate/internal/reconcile"
	"callgate/internal/store"
)

// ReconcileCommand is `worker reconcile --order CODE`: it asks the order's
// platform now, whether the order is due or not, stores what the answer
// says happened (announced to the workers), records it like a scheduled
// query, and prints the platform's answer and what was stored.
func ReconcileCommand(ctx context.Context, set Settings, kinds []string, args []string, out, stderr io.Writer, logger *slog.Logger) int {
	fs := flag.NewFlagSet("worker reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	order := fs.String("order", "", "the order code to ask about (required)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: worker [-config PATH] reconcile --order CODE\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *order == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if err := reconcileOne(ctx, set, kinds, *order, out, logger); err != nil {
		fmt.Fprintf(stderr, "worker reconcile: %v\n", err)
		return 1
	}
	return 0
}

func reconcileOne(ctx context.Context, set Settings, kinds []string, code string, out io.Writer, logger *slog.Logger) error {
	st, err := store.Open(set.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	o, err := st.ReconcileOrder(ctx, code)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no order %s", code)
	}
	if err != nil {
		return err
	}
	if o.Source == "" {
		return fmt.Errorf("order %s has no payment_source: nothing says which platform to ask", code)
	}
	platforms := map[string]platform.Platform{}
	for _, s := range set.Sources {
		if s.Preset != "" && !s.Disabled() {
			p, err := platform.New(s.Preset, s.Platform)
			if err != nil {
				return fmt.Errorf("source %s: %w", s.Name, err)
			}
			platforms[s.Name] = p
		}
	}
	topo := broker.NewTopology(set.Broker, kinds)
	mq := broker.Start(set.Broker, "callgate-worker-reconcile", topo, 5*time.Second, func() {}, logger)
	defer mq.Stop()
	// What the answer stores is announced at once when the broker is
	// there; otherwise compensation announces it after its threshold.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, werr := mq.Conn.Wait(wctx)
	cancel()
	if werr != nil {
		fmt.Fprintf(out, "the broker cannot be reached: what is stored is announced by compensation (scheduler.compensation.threshold)\n")
	}
	job, err := Reconciliation(ctx, set, st, platforms, ingest.AnnounceNew(mq.Announcer, logger), metrics.New("worker"), logger)
	if err != nil {
		return err
	}
	rep, err := job.Ask(ctx, o)
	if err != nil {
		return err
	}
	if rep.Outcome == reconcile.OutcomeThrottled {
		// Paused or its circuit open (for the fleet), or it said 429/503
		// now: the order is not charged a query.
		fmt.Fprintf(out, "order %s, payment source %s: not asked now, the order is not charged a query: %v\n", code, o.Source, rep.Err)
		return nil
	}
	fmt.Fprintf(out, "order %s, payment source %s, query %d: %s\n", code, o.Source, o.Queries+1, rep.Outcome)
	if rep.Err != nil {
		fmt.Fprintf(out, "error: %v\n", rep.Err)
	}
	if rep.Answer != "" {
		fmt.Fprintf(out, "the platform answered: %s\n", rep.Answer)
	}
	for _, s := range rep.Stored {
		what := "stored as callback"
		if s.Duplicate {
			what = "already stored as callback"
		}
		fmt.Fprintf(out, "%s %d (origin reconcile); the workers process it\n", what, s.LogID)
	}
	if rep.GaveUp {
		fmt.Fprintf(out, "unresolved: no query is left before give_up\n")
	} else {
		fmt.Fprintf(out, "next query at %s unless the order is settled\n", rep.NextAt.Format(time.RFC3339))
	}
	return nil
}
