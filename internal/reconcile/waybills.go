package reconcile

import (
	"context"
	"slices"
	"time"

	"callgate/internal/outbound"
	"callgate/internal/platform"
	"callgate/internal/store"
)

// Waybills: a shipment whose tracking source's platform is asked (Kuaidi100),
// not delivered, and silent (no new checkpoint) for the source's silent_for,
// is asked about with the platform's real-time query; then again each
// silent_for while it stays silent, until it has been silent for
// silent_for + give_up. What the answer shows is stored and processed as
// the push of the same snapshot would be (the same event id: a push of it
// later is a duplicate); an answer that shows nothing new stores nothing.

// WaybillQuerier asks one platform about one waybill.
type WaybillQuerier interface {
	QueryWaybill(ctx context.Context, w store.SilentWaybill) (Answer, error)
}

// SilentForDefault is a waybill source's silent_for when unset.
const SilentForDefault = 24 * time.Hour

// runWaybills asks about src's silent waybills due (up to the batch size)
// until its gate stops it, and returns how many it asked about.
func (j *Job) runWaybills(ctx context.Context, cfg Config, src *Source, g *gate) (int, error) {
	silent := src.SilentFor
	if silent <= 0 {
		silent = SilentForDefault
	}
	now := j.now().UTC()
	// A waybill is asked last silent + give_up after its last change;
	// one silent a day longer than that was given up on.
	due, err := j.Store.SilentWaybills(ctx, []string{src.Name}, now.Add(-silent-cfg.GiveUp-24*time.Hour), now.Add(-silent), now, cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	asked := 0
	for _, w := range due {
		if asked > 0 && spent(ctx) { // each run asks one at least
			break
		}
		rep, err := j.askWaybill(ctx, cfg, src, silent, w)
		if err != nil {
			return asked, err
		}
		if rep.Outcome == OutcomeThrottled {
			break
		}
		asked++
		if g.blocked() != "" {
			break
		}
	}
	return asked, nil
}

// askWaybill queries one waybill, stores what its answer shows, and
// records where the waybill stands. Only the recording's failure is an
// error.
func (j *Job) askWaybill(ctx context.Context, cfg Config, src *Source, silent time.Duration, w store.SilentWaybill) (Report, error) {
	g := src.gateOf(cfg, j.now)
	qctx, cancel := context.WithTimeout(ctx, cfg.QueryTimeout)
	ans, err := src.Waybills.QueryWaybill(qctx, w)
	cancel()
	rep := Report{Err: err, Outcome: queryOutcome(err, ans)}
	if rep.Outcome == "" {
		rep.Answer = string(ans.Body)
		rep.Outcome, rep.Stored, rep.Err = j.store(ctx, src, w.WaybillNo, ans)
		if rep.Outcome == OutcomeFound && !slices.ContainsFunc(rep.Stored, func(s platform.Stored) bool { return !s.Duplicate }) {
			rep.Outcome = OutcomeNothing // the snapshot callgate already had
		}
	}
	if j.Counted != nil {
		j.Counted(src.Name, rep.Outcome)
	}
	if rep.Err != nil {
		j.Log.Warn("reconcile: waybill query changed nothing", "source", src.Name, "waybill", w.WaybillNo, "outcome", rep.Outcome, "error", rep.Err)
	}
	if rep.Outcome == OutcomeThrottled {
		return rep, nil // the waybill keeps its steps (gate.go)
	}
	j.answered(src, g, rep)
	now := j.now().UTC()
	res := store.ReconcileResult{Order: w.WaybillNo, Source: src.Name, Queries: w.Queries + 1, Outcome: rep.Outcome, NextAt: now.Add(silent)}
	if rep.Err != nil {
		res.Error = outbound.Describe(rep.Err)
	}
	for _, s := range rep.Stored {
		if !s.Duplicate && s.LogID != 0 {
			res.FoundLogID = s.LogID
			break
		}
	}
	// The last query is silent + give_up after the last change; one then
	// that found nothing new gives up: a parcel on-call should look at
	// (asked again only once a new checkpoint comes).
	deadline := w.UpdatedAt.Add(silent + cfg.GiveUp)
	if res.NextAt.After(deadline) {
		res.NextAt = deadline
	}
	if !now.Before(deadline) && res.FoundLogID == 0 {
		res.GaveUp = true
		if j.GaveUp != nil {
			j.GaveUp(src.Name)
		}
		j.Log.Warn("reconcile: gave up on a silent waybill: on-call should look", "source", src.Name, "waybill", w.WaybillNo,
			"silent_since", w.UpdatedAt, "queries", res.Queries, "outcome", rep.Outcome)
	}
	rep.NextAt, rep.GaveUp = res.NextAt, res.GaveUp
	return rep, j.Store.RecordWaybill(ctx, res, now)
}
