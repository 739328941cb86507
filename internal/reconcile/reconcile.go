// Package reconcile asks the platforms about what never arrived: an order
// with a payment source whose reconciliation is configured, still UNPAID
// scheduler.reconcile.after after it was created, is queried on the
// platform's query API, then again on a backoff, until give_up, when it is
// listed for on-call as unresolved. An answer that says something happened
// is stored as a callback of that source with origin reconcile, the raw
// answer kept, the canonical event made by the source's preset (its
// Answerer, on the same mapping its notifications use), and processed by
// the worker like any other: the same rows, made, stored and announced by
// internal/ingest as the intake's are, the same rules. An answer that
// says nothing happened stores nothing; one that fails its signature,
// times out or is refused changes nothing and is counted.
//
// The job runs on the scheduler leader only (the fleet's lease), so each
// order is asked once per step whatever the number of workers, and each
// platform at most rate queries a second.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"callgate/internal/callback"
	"callgate/internal/ingest"
	"callgate/internal/outbound"
	"callgate/internal/platform"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Config is the file's scheduler.reconcile section.
type Config struct {
	// After is how long after its creation an order is first asked about.
	// Env CALLGATE_RECONCILE_AFTER. Default 10m.
	After time.Duration `yaml:"after"`
	// Interval between the job's runs. Env CALLGATE_RECONCILE_INTERVAL.
	// Default 1m.
	Interval time.Duration `yaml:"interval"`
	// GiveUp is how long after its creation an order stops being asked
	// about (it is then unresolved). Default 48h.
	GiveUp time.Duration `yaml:"give_up"`
	// Backoff are the waits between one query and the next, the last
	// repeated. Default 10m, 30m, 1h, 3h, 6h, 24h.
	Backoff []time.Duration `yaml:"backoff"`
	// Rate bounds the queries per second to each platform. Default 10.
	Rate float64 `yaml:"rate"`
	// BatchSize is how many due orders of each source one run asks about
	// at most. Default 200.
	BatchSize int `yaml:"batch_size"`
	// QueryTimeout bounds one query (each request of a Stripe listing).
	// Default 10s.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// PauseDefault is how long a platform that answers 429 or 503 without
	// a Retry-After is left alone. Default 1m.
	PauseDefault time.Duration `yaml:"pause_default"`
	// MaxPause caps a Retry-After. Default 15m.
	MaxPause time.Duration `yaml:"max_pause"`
	// CircuitAfter queries in a row that reach no answer open the
	// platform's circuit. Default 3.
	CircuitAfter int `yaml:"circuit_after"`
	// CircuitOpen is how long an open circuit asks nothing. Default 5m.
	CircuitOpen time.Duration `yaml:"circuit_open"`
}

// Config defaults.
const (
	AfterDefault     = 10 * time.Minute
	IntervalDefault  = time.Minute
	GiveUpDefault    = 48 * time.Hour
	RateDefault      = 10
	BatchSizeDefault = 200

	QueryTimeoutDefault = 10 * time.Second
	PauseDefaultDefault = time.Minute
	MaxPauseDefault     = 15 * time.Minute
	CircuitAfterDefault = 3
	CircuitOpenDefault  = 5 * time.Minute
)

// BackoffDefault is Config.Backoff when unset.
var BackoffDefault = []time.Duration{10 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 24 * time.Hour}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.After <= 0 {
		c.After = AfterDefault
	}
	if c.Interval <= 0 {
		c.Interval = IntervalDefault
	}
	if c.GiveUp <= 0 {
		c.GiveUp = GiveUpDefault
	}
	if len(c.Backoff) == 0 {
		c.Backoff = BackoffDefault
	}
	if c.Rate <= 0 {
		c.Rate = RateDefault
	}
	if c.BatchSize <= 0 {
		c.BatchSize = BatchSizeDefault
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = QueryTimeoutDefault
	}
	if c.PauseDefault <= 0 {
		c.PauseDefault = PauseDefaultDefault
	}
	if c.MaxPause <= 0 {
		c.MaxPause = MaxPauseDefault
	}
	if c.CircuitAfter <= 0 {
		c.CircuitAfter = CircuitAfterDefault
	}
	if c.CircuitOpen <= 0 {
		c.CircuitOpen = CircuitOpenDefault
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	for i, d := range c.Backoff {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("scheduler.reconcile.backoff[%d]: must be positive", i))
		}
	}
	if c.GiveUp > 0 && c.After > 0 && c.GiveUp <= c.After {
		errs = append(errs, fmt.Errorf("scheduler.reconcile.give_up (%s) must be longer than after (%s)", c.GiveUp, c.After))
	}
	// A query waits for the rate within its timeout: a rate slower than
	// one query per query_timeout would time every query out.
	if d := c.WithDefaults(); time.Duration(float64(time.Second)/d.Rate) >= d.QueryTimeout {
		errs = append(errs, fmt.Errorf("scheduler.reconcile.rate (%g a second) must allow a query within query_timeout (%s): at least %g",
			d.Rate, d.QueryTimeout, 2/d.QueryTimeout.Seconds()))
	}
	return errors.Join(errs...)
}

// wait is how long after its n-th query (n >= 1) an order is asked again.
func (c Config) wait(n int) time.Duration { return c.Backoff[min(n, len(c.Backoff))-1] }

// Answer is a platform's answer to a query, its signature verified.
type Answer struct {
	Body   []byte
	Header http.Header
	// NotFound: the platform knows no payment of the order (nothing
	// happened yet).
	NotFound bool
}

// Querier asks one platform about one order.
type Querier interface {
	Query(ctx context.Context, order string) (Answer, error)
}

// Errors a Querier wraps, naming the outcome.
var (
	// ErrBadSignature: the answer's signature did not hold.
	ErrBadSignature = errors.New("the answer's signature did not hold")
	// ErrRefused: the platform refused the query (4xx or 5xx).
	ErrRefused = errors.New("the platform refused the query")
	// ErrNotOurs: the answer is about another order, waybill or carrier
	// than the one asked about.
	ErrNotOurs = errors.New("the answer is not about what was asked")
	// ErrStoreFailed: what the platform answered could not be stored.
	ErrStoreFailed = errors.New("what the platform answered could not be stored")
)

// Outcomes of a query (callgate_reconcile_queries_total{outcome}).
const (
	OutcomeFound        = "found"
	OutcomeNothing      = "nothing"
	OutcomeBadSignature = "bad_signature"
	OutcomeRefused      = "refused"
	OutcomeUnreachable  = "unreachable"
	OutcomeNotOurs      = "not_ours"
	OutcomeStoreFailed  = "store_failed"
	// OutcomeRefunded: the platform says the order was paid and refunded
	// since, without saying how much: nothing is applied, on-call decides.
	OutcomeRefunded = "refunded"
)

// Source is one source whose platform is asked: about orders (Querier)
// or about silent waybills (Waybills, see waybills.go).
type Source struct {
	Name, Kind string
	Querier    Querier
	Waybills   WaybillQuerier
	// SilentFor is how long a waybill is silent before it is asked about.
	SilentFor time.Duration
	// Answers reads the platform's answers (the source's preset).
	Answers platform.Answerer
	// Headers are the answer headers stored with a callback
	// (ingest.KeptHeaders).
	Headers []string
	// gate is the source's rate, pause and circuit (gate.go); its
	// transport is under the querier's client.
	gate   *gate
	gateMu sync.Mutex
	// catchUp, when set, reads the platform's events list and stores what
	// it missed before the orders are asked about (Stripe, stripe.go); the
	// Querier then answers from it, without a request of its own.
	catchUp func(ctx context.Context, j *Job, cfg Config, src *Source) error
}

// Job asks the platforms about the orders that are due.
type Job struct {
	Config  Config
	Store   *store.Store
	Sources map[string]*Source
	// Announce announces stored callbacks (ingest.AnnounceNew over the
	// worker's announcer); nil: compensation finds them.
	Announce func([]store.Inserted)
	// ReannounceAfter is when compensation announces a stored callback
	// again (scheduler.compensation.threshold).
	ReannounceAfter time.Duration
	Log             *slog.Logger
	// Counted is told each query's outcome, and each found callback's kind.
	Counted func(source, outcome string)
	Found   func(source, kind string)
	GaveUp  func(source string)
	// CircuitOpened is told each time a source's circuit opens (the
	// paused and open gauges are read from reconcile_platforms by every
	// instance: internal/scheduler's Gauges).
	CircuitOpened func(source string)
	Now           func() time.Time
}

func (j *Job) now() time.Time {
	if j.Now != nil {
		return j.Now()
	}
	return time.Now()
}

// Names lists the sources asked about orders.
func (j *Job) Names() []string {
	out := make([]string, 0, len(j.Sources))
	for n, src := range j.Sources {
		if src.Querier != nil {
			out = append(out, n)
		}
	}
	return out
}

// RunOnce asks each source's platform about its due orders (up to the
// batch size each), every source in its own goroutine, and returns how
// many it asked about: a slow or failing platform delays only its own
// orders (gate.go).
func (j *Job) RunOnce(ctx context.Context) (int, error) {
	cfg := j.Config.WithDefaults()
	var (
		mu    sync.Mutex
		asked int
		errs  []error
		wg    sync.WaitGroup
	)
	for _, src := range j.Sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := j.runSource(ctx, cfg, src)
			mu.Lock()
			defer mu.Unlock()
			asked += n
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", src.Name, err))
			}
		}()
	}
	wg.Wait()
	return asked, errors.Join(errs...)
}

// runSource asks src's platform about its due orders: what the last run
// left (its gate's state, shared by the fleet), its catch-up, the orders in
// the query window, then those older than the window not yet given up on,
// then its silent waybills; it stops at a pause or an open circuit.
func (j *Job) runSource(ctx context.Context, cfg Config, src *Source) (int, error) {
	g := src.gateOf(cfg, j.now)
	// A run asks for an interval at most (and the query under way): a
	// platform slow to answer leaves the rest of its orders to the next
	// run rather than hold back the others' (the job's runs do not
	// overlap).
	ctx = withBudget(ctx, time.Now().Add(cfg.Interval))
	if err := g.load(ctx, j.Store); err != nil {
		return 0, err
	}
	defer func() {
		if err := g.save(context.WithoutCancel(ctx), j.Store); err != nil {
			j.Log.Warn("reconcile: where the platform stands was not recorded", "source", src.Name, "error", err)
		}
	}()
	if why := g.blocked(); why != "" {
		j.Log.Info("reconcile: not asking the platform now", "source", src.Name, "why", why)
		return 0, nil
	}
	asked := 0
	if src.Querier != nil {
		if src.catchUp != nil {
			if err := src.catchUp(ctx, j, cfg, src); err != nil {
				return 0, err
			}
			if g.blocked() != "" { // the listing was told to wait
				return 0, nil
			}
		}
		now := j.now().UTC()
		windowStart := now.Add(-cfg.GiveUp - 24*time.Hour)
		due, err := j.Store.DueReconciles(ctx, []string{src.Name}, windowStart, now.Add(-cfg.After), now.Add(-cfg.GiveUp), now, cfg.BatchSize)
		if err != nil {
			return 0, err
		}
		n, stop, err := j.askAll(ctx, cfg, src, g, due, false)
		asked += n
		if err != nil || stop || (n > 0 && spent(ctx)) {
			return asked, err
		}
		late, err := j.Store.LateReconciles(ctx, src.Name, g.state().LateCreatedAt, g.state().LateOrderCode, windowStart, cfg.BatchSize)
		if err != nil {
			return asked, err
		}
		n, stop, err = j.askAll(ctx, cfg, src, g, late, true)
		asked += n
		if err != nil || stop {
			return asked, err
		}
		if len(late) < cfg.BatchSize {
			// The walk reached the window: the next one starts over, so
			// that an order written with an older created_at, or given
			// its payment_source after the walk passed, is asked too.
			g.restartLate()
		}
	}
	if src.Waybills != nil {
		n, err := j.runWaybills(ctx, cfg, src, g)
		asked += n
		if err != nil {
			return asked, err
		}
	}
	return asked, nil
}

// askAll asks about orders one after another until the gate stops it
// (stop). late: the orders are older than the query window; one given up
// on is passed, each asked is asked its last time, and the walk's position
// moves past each.
func (j *Job) askAll(ctx context.Context, cfg Config, src *Source, g *gate, orders []store.DueOrder, late bool) (asked int, stop bool, err error) {
	for _, o := range orders {
		if ctx.Err() != nil {
			return asked, true, ctx.Err()
		}
		if asked > 0 && spent(ctx) { // each run asks one at least
			return asked, true, nil
		}
		if late && o.GaveUp {
			g.passedLate(o)
			continue
		}
		rep, err := j.ask(ctx, cfg, src, o)
		if err != nil {
			return asked, true, err
		}
		if rep.Outcome == OutcomeThrottled {
			return asked, true, nil
		}
		asked++
		if late {
			g.passedLate(o)
		}
		if g.blocked() != "" {
			return asked, true, nil
		}
	}
	return asked, false, nil
}

// gateOf is src's gate (made by ForSource, or on first use), set to cfg.
func (src *Source) gateOf(cfg Config, now func() time.Time) *gate {
	src.gateMu.Lock()
	defer src.gateMu.Unlock()
	if src.gate == nil {
		src.gate = newGate(src.Name, cfg)
	}
	src.gate.configure(cfg, now)
	return src.gate
}

// Report is what asking about one order gave.
type Report struct {
	Outcome string
	// Answer is the platform's answer ("" when none came).
	Answer string
	// Stored are the callbacks it stored (duplicates included).
	Stored []platform.Stored
	// Err is why the query failed.
	Err error
	// NextAt is when the order is asked again; GaveUp: never.
	NextAt time.Time
	GaveUp bool
}

// Ask asks about one order now, whether due or not (worker reconcile
// --order), and records it like a scheduled query.
func (j *Job) Ask(ctx context.Context, order store.DueOrder) (Report, error) {
	src := j.Sources[order.Source]
	if src == nil || src.Querier == nil {
		return Report{}, fmt.Errorf("source %q is not reconciled (see the start-up line)", order.Source)
	}
	cfg := j.Config.WithDefaults()
	g := src.gateOf(cfg, j.now)
	if err := g.load(ctx, j.Store); err != nil {
		return Report{}, err
	}
	defer func() {
		if err := g.save(context.WithoutCancel(ctx), j.Store); err != nil {
			j.Log.Warn("reconcile: where the platform stands was not recorded", "source", src.Name, "error", err)
		}
	}()
	if why := g.blocked(); why != "" {
		return Report{Outcome: OutcomeThrottled, Err: fmt.Errorf("%w: %s", ErrPaused, why)}, nil
	}
	if src.catchUp != nil {
		if err := src.catchUp(ctx, j, cfg, src); err != nil {
			return Report{}, err
		}
	}
	return j.ask(ctx, cfg, src, order)
}

// ask queries one order, stores what its answer says happened, and records
// where the order stands. Only the recording's failure is an error.
func (j *Job) ask(ctx context.Context, cfg Config, src *Source, o store.DueOrder) (Report, error) {
	g := src.gateOf(cfg, j.now)
	qctx, cancel := context.WithTimeout(ctx, cfg.QueryTimeout)
	ans, err := src.Querier.Query(qctx, o.Code)
	cancel()
	rep := Report{Err: err, Outcome: queryOutcome(err, ans)}
	if rep.Outcome == "" {
		rep.Answer = string(ans.Body)
		rep.Outcome, rep.Stored, rep.Err = j.store(ctx, src, o.Code, ans)
	}
	if j.Counted != nil {
		j.Counted(src.Name, rep.Outcome)
	}
	if rep.Err != nil {
		j.Log.Warn("reconcile: query changed nothing", "source", src.Name, "order", o.Code, "outcome", rep.Outcome, "error", rep.Err)
	}
	if rep.Outcome == OutcomeThrottled {
		// The platform asked to be asked later: the order keeps its
		// steps, and is asked once the pause ends.
		return rep, nil
	}
	j.answered(src, g, rep)
	now := j.now().UTC()
	res := store.ReconcileResult{Order: o.Code, Source: src.Name, Queries: o.Queries + 1, Outcome: rep.Outcome,
		NextAt: now.Add(cfg.wait(o.Queries + 1))}
	if rep.Err != nil {
		res.Error = outbound.Describe(rep.Err)
	}
	if len(rep.Stored) > 0 {
		res.FoundLogID = rep.Stored[0].LogID
	}
	// The last query is at give_up; one then, or after, that found
	// nothing leaves the order unresolved. (What was found is processed;
	// if it leaves the order UNPAID, the order is asked again.)
	deadline := o.CreatedAt.Add(cfg.GiveUp)
	if res.NextAt.After(deadline) {
		res.NextAt = deadline
	}
	// (A found answer that left the order UNPAID, an amount that does not
	// match, say, is unresolved at give_up too.)
	if !now.Before(deadline) {
		res.GaveUp = true
		if j.GaveUp != nil {
			j.GaveUp(src.Name)
		}
		j.Log.Warn("reconcile: gave up on an order: no payment found, on-call should look", "source", src.Name, "order", o.Code,
			"queries", res.Queries, "outcome", rep.Outcome)
	}
	rep.NextAt, rep.GaveUp = res.NextAt, res.GaveUp
	return rep, j.Store.RecordReconcile(ctx, res, now)
}

// queryOutcome names the outcome of a query that failed or found nothing
// ("": the answer is to be stored).
func queryOutcome(err error, ans Answer) string {
	switch {
	case errors.Is(err, ErrThrottled), errors.Is(err, ErrPaused):
		return OutcomeThrottled
	case errors.Is(err, ErrBadSignature):
		return OutcomeBadSignature
	case errors.Is(err, ErrRefused):
		return OutcomeRefused
	case errors.Is(err, ErrNotOurs):
		return OutcomeNotOurs
	case errors.Is(err, ErrStoreFailed):
		return OutcomeStoreFailed
	case err != nil:
		return OutcomeUnreachable
	case ans.NotFound:
		return OutcomeNothing
	}
	return ""
}

// answered tells src's gate what a query that was made gave, and says so
// when it opened the circuit.
func (j *Job) answered(src *Source, g *gate, rep Report) {
	if !g.answered(rep.Outcome, rep.Err) {
		return
	}
	st := g.state()
	if j.CircuitOpened != nil {
		j.CircuitOpened(src.Name)
	}
	j.Log.Warn("reconcile: the platform's circuit is open: queries in a row reached no answer; nothing is asked until it closes",
		"source", src.Name, "failures", st.Failures, "until", st.CircuitOpenUntil, "error", st.LastError)
}

// store turns a verified answer into the intake's rows, through the
// source's preset, and stores and announces them (internal/ingest, as the
// intake does a notification). A row the primary alone holds counts as
// found: it is stored and announced.
func (j *Job) store(ctx context.Context, src *Source, order string, ans Answer) (string, []platform.Stored, error) {
	cbs, err := src.Answers.ReadAnswer(order, ans.Body)
	if errors.Is(err, platform.ErrRefundedAnswer) {
		return OutcomeRefunded, nil, err
	}
	if err != nil {
		return OutcomeNotOurs, nil, err
	}
	if len(cbs) == 0 {
		return OutcomeNothing, nil, nil
	}
	now := j.now().UTC().Truncate(time.Microsecond)
	due := now.Add(j.ReannounceAfter)
	template := &callback.Log{Source: src.Name, Kind: src.Kind, Status: callback.StatusPending, Payload: ans.Body,
		Headers: ingest.StoredHeaders(ans.Header, src.Headers), TraceID: tracing.TraceID(tracing.FromHeaders(ctx, nil)),
		ReceivedAt: now, NextAttemptAt: &due,
		Origin: callback.OriginReconcile}
	rows, err := ingest.PresetRows(template, cbs, func(cb platform.Callback) {
		j.Log.Warn("reconcile: answer stored unreadable", "source", src.Name, "order", order, "event_id", cb.EventID, "reason", cb.Unreadable)
	})
	if err != nil {
		return OutcomeNotOurs, nil, err
	}
	stored, err := ingest.InsertAll(ctx, ingest.OneByOne{Store: j.Store, Announce: j.Announce}, rows)
	if err != nil && !errors.Is(err, store.ErrNotReplicated) {
		return OutcomeStoreFailed, stored, err
	}
	fresh := 0
	for i, s := range stored {
		if s.LogID != 0 && !s.Duplicate {
			fresh++
			if j.Found != nil {
				j.Found(src.Name, foundKind(cbs[i]))
			}
		}
	}
	j.Log.Info("reconcile: the platform's answer was stored", "source", src.Name, "order", order, "callbacks", len(stored), "new", fresh)
	return OutcomeFound, stored, nil
}

// foundKind names what a found callback says: paid, closed, failed,
// refund, unreadable.
func foundKind(cb platform.Callback) string {
	p, ok := cb.Event.(callback.PaymentEvent)
	_, carrier := cb.Event.(callback.CarrierEvent)
	switch {
	case cb.Unreadable != "":
		return "unreadable"
	case carrier:
		return "shipment"
	case !ok:
		return "other"
	case p.Type == callback.TypeClose:
		return "closed"
	case p.Type == callback.TypeRefund:
		return "refund"
	case p.Status == callback.PaymentSuccess:
		return "paid"
	case p.Status == callback.PaymentFailed:
		return "failed"
	}
	return "other"
}
