package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"callgate/internal/outbound"
	"callgate/internal/store"
)

// A platform that is slow, refuses or hangs delays only its own orders
// (docs/reconciliation.md, "A slow, refusing or hung platform"):
//
//   - each source is asked in its own goroutine, at its own rate;
//   - a 429 or 503 answer pauses the source until its Retry-After (capped
//     by max_pause; pause_default without one): the order asked is not
//     charged a query, and nothing more is asked before the pause ends;
//   - circuit_after queries in a row that reach no answer (timeouts,
//     connections refused) open the source's circuit for circuit_open:
//     nothing is asked meanwhile, then one query decides (an answer closes
//     it, another failure opens it again).
//
// The gate is the source's http.RoundTripper, under its querier's SDK: it
// waits for the rate, refuses while paused, and turns a 429 or 503 into a
// pause before any SDK reads it. Its state is kept in reconcile_platforms
// for the fleet (a new leader, the console, the start-up line).

// Errors of the gate.
var (
	// ErrThrottled: the platform answered 429 or 503; the source is paused.
	ErrThrottled = errors.New("the platform asked to be asked later")
	// ErrPaused: the source is paused or its circuit open; nothing was asked.
	ErrPaused = errors.New("the platform is not asked now")
)

// OutcomeThrottled is a query the platform answered 429 or 503: counted,
// not charged to the order.
const OutcomeThrottled = "throttled"

// gate is one source's rate, pause and circuit.
type gate struct {
	source string
	limit  *rate.Limiter
	cfg    Config

	mu sync.Mutex
	st store.PlatformState
	// dirty: st changed since it was last saved.
	dirty bool
	now   func() time.Time
}

func newGate(source string, cfg Config) *gate {
	cfg = cfg.WithDefaults()
	return &gate{source: source, cfg: cfg, limit: rate.NewLimiter(rate.Limit(cfg.Rate), 1), now: time.Now,
		st: store.PlatformState{Source: source}}
}

// configure takes cfg's settings (the rate, the pause and circuit) and the
// job's clock.
func (g *gate) configure(cfg Config, now func() time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cfg, g.now = cfg.WithDefaults(), now
	if g.limit.Limit() != rate.Limit(g.cfg.Rate) {
		g.limit.SetLimit(rate.Limit(g.cfg.Rate))
	}
}

// wrap puts the gate under base (the outbound client's transport).
func (g *gate) wrap(base http.RoundTripper) http.RoundTripper {
	return gateTransport{g: g, base: base}
}

type gateTransport struct {
	g    *gate
	base http.RoundTripper
}

func (t gateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if why := t.g.blocked(); why != "" {
		closeBody(r)
		return nil, fmt.Errorf("%w: %s", ErrPaused, why)
	}
	if err := t.g.limit.Wait(r.Context()); err != nil {
		closeBody(r)
		return nil, err
	}
	res, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		_ = res.Body.Close()
		until := t.g.pause(res.StatusCode, res.Header.Get("Retry-After"))
		return nil, fmt.Errorf("%w: HTTP %d, paused until %s", ErrThrottled, res.StatusCode, until.Format(time.RFC3339))
	}
	return res, nil
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}

// pause pauses the source after an answer of status with retryAfter (its
// Retry-After header: seconds or an HTTP date) and returns until when.
func (g *gate) pause(status int, retryAfter string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now().UTC()
	wait := g.cfg.PauseDefault
	if s, err := strconv.ParseInt(retryAfter, 10, 64); err == nil && s >= 0 {
		wait = time.Duration(min(s, int64(g.cfg.MaxPause/time.Second)+1)) * time.Second
	} else if t, err := http.ParseTime(retryAfter); err == nil {
		wait = t.Sub(now)
	}
	wait = min(max(wait, time.Second), g.cfg.MaxPause)
	until := now.Add(wait)
	if g.st.PausedUntil == nil || until.After(*g.st.PausedUntil) {
		g.st.PausedUntil = &until
	}
	g.st.PauseReason = fmt.Sprintf("HTTP %d, Retry-After %q", status, retryAfter)
	g.dirty = true
	return *g.st.PausedUntil
}

// blocked says why the source is not asked now ("": it is).
func (g *gate) blocked() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st.Stalled(g.now())
}

// answered records the outcome of a query that was made (not throttled):
// a run of unreachable ones opens the circuit; it returns true when this
// one opened it.
func (g *gate) answered(outcome string, err error) (opened bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now().UTC()
	if outcome != OutcomeUnreachable {
		if g.st.Failures != 0 || g.st.CircuitOpenUntil != nil {
			g.st.Failures, g.st.CircuitOpenUntil, g.dirty = 0, nil, true
		}
		return false
	}
	g.st.Failures++
	if err != nil {
		g.st.LastError = outbound.Describe(err)
	}
	g.dirty = true
	if g.st.Failures >= g.cfg.CircuitAfter {
		until := now.Add(g.cfg.CircuitOpen)
		g.st.CircuitOpenUntil = &until
		g.st.CircuitOpened++
		return true
	}
	return false
}

// state is a copy of the gate's state.
func (g *gate) state() store.PlatformState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st
}

// load reads the source's row (what another leader, or an earlier run,
// left), unless this process has changes to it not saved yet.
func (g *gate) load(ctx context.Context, st *store.Store) error {
	p, err := st.ReconcilePlatform(ctx, g.source)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.dirty {
		g.st = p
	}
	return nil
}

// save writes the gate's state if it changed.
func (g *gate) save(ctx context.Context, st *store.Store) error {
	g.mu.Lock()
	if !g.dirty {
		g.mu.Unlock()
		return nil
	}
	p := g.st
	g.dirty = false
	g.mu.Unlock()
	if err := st.SetReconcilePlatform(ctx, p, time.Now().UTC()); err != nil {
		g.mu.Lock()
		g.dirty = true
		g.mu.Unlock()
		return err
	}
	return nil
}

// restartLate starts the late walk over from the oldest order.
func (g *gate) restartLate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.st.LateCreatedAt != nil {
		g.st.LateCreatedAt, g.st.LateOrderCode, g.dirty = nil, "", true
	}
}

// withBudget marks ctx with the time a source's run stops asking.
func withBudget(ctx context.Context, until time.Time) context.Context {
	return context.WithValue(ctx, budgetKey{}, until)
}

type budgetKey struct{}

// spent reports whether the run's budget is over.
func spent(ctx context.Context) bool {
	until, ok := ctx.Value(budgetKey{}).(time.Time)
	return ok && !time.Now().Before(until)
}

// passedLate moves the late walk past o.
func (g *gate) passedLate(o store.DueOrder) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at := o.CreatedAt
	g.st.LateCreatedAt, g.st.LateOrderCode, g.dirty = &at, o.Code, true
}

// LogStalled logs, for each source asked, whether the fleet left it paused
// or its circuit open (the start-up's view; the console shows the same).
func (j *Job) LogStalled(ctx context.Context) {
	states, err := j.Store.ReconcilePlatforms(ctx)
	if err != nil {
		j.Log.Warn("reconcile: where the platforms stand could not be read", "error", err)
		return
	}
	now := j.now()
	for _, st := range states {
		if j.Sources[st.Source] == nil {
			continue
		}
		if why := st.Stalled(now); why != "" {
			j.Log.Warn("worker: reconciliation of a source is stalled", "source", st.Source, "why", why)
		}
	}
}
