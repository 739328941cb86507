package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v82"

	"callgate/internal/callback"
	"callgate/internal/outbound"
	"callgate/internal/platform"
	"callgate/internal/source"
)

// StripeAPIBase is STRIPE_API_BASE's default.
const StripeAPIBase = "https://api.stripe.com"

// stripeListedAtMost is how far back Stripe's events list goes.
const stripeListedAtMost = 30 * 24 * time.Hour

// Stripe is not asked order by order: Stripe has no "what happened to my
// order" query, but it lists the events it created (GET /v1/events, up to
// 30 days back), and with delivery_success=false only those whose webhook
// was not delivered (still pending, or failed). Each run of the job first
// catches up: it lists, with Stripe's own Go SDK
// (github.com/stripe/stripe-go/v82: its list iterator pages with
// starting_after, its backend authenticates with the secret key), the
// events of the types the stripe preset maps, created since the source's
// checkpoint and at least scheduler.reconcile.after ago (a webhook still
// in flight is not "missed"), and stores each as a callback of the stripe
// source (origin reconcile) under the event's own id, the event's JSON as
// listed kept: the late webhook of the same event is then an exact
// duplicate. The checkpoint (reconcile_checkpoints) starts give_up back
// (30 days at most) and moves to the end of the window listed only when
// every event of the listing was stored; re-listing a second stores
// nothing twice. The orders paid through Stripe keep their per-order
// bookkeeping (backoff, give_up, the unresolved listing): the Querier
// answers from the last catch-up, what it stored about the order, nothing,
// or the catch-up's failure.
type Stripe struct {
	client *stripe.Client

	mu sync.Mutex
	// listed: a catch-up ran; err: why the last one failed (nil: it stored
	// everything); found: the events it stored, by order.
	listed bool
	err    error
	found  map[string][]byte
}

// StripeConfig is what listing Stripe's events takes.
type StripeConfig struct {
	// APIKey is the secret (sk_...) or restricted (rk_..., with read
	// access to events) key: STRIPE_API_KEY.
	APIKey string
	// APIBase is Stripe's API (default StripeAPIBase).
	APIBase string
	// HTTP is the client (default: one with the query timeout).
	HTTP *http.Client
}

// NewStripe builds the Stripe lister.
func NewStripe(cfg StripeConfig) (*Stripe, error) {
	key := strings.TrimSpace(cfg.APIKey)
	if key == "" {
		return nil, errors.New("Stripe reconciliation needs STRIPE_API_KEY")
	}
	// The secret key goes with every request: https only.
	base, err := apiBase("STRIPE_API_BASE", cfg.APIBase, StripeAPIBase)
	if err != nil {
		return nil, err
	}
	s := &Stripe{}
	hc := cfg.HTTP
	if hc == nil {
		hc = outbound.Client(outbound.Options{Timeout: QueryTimeoutDefault, MaxAnswerBytes: maxAnswerBytes})
	}
	// Each page waits for the source's rate (its gate, under hc).
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:        stripe.String(base),
		HTTPClient: hc,
		// The job lists again on its next run: no retries inside one.
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	s.client = stripe.NewClient(key, stripe.WithBackends(&stripe.Backends{API: backend}))
	return s, nil
}

func newStripeSource(_ context.Context, s source.Config, _ platform.Platform, hc *http.Client) (*Source, error) {
	q, err := NewStripe(StripeConfig{APIKey: s.Reconcile.APIKey, APIBase: s.Reconcile.APIBase, HTTP: hc})
	if err != nil {
		return nil, err
	}
	return &Source{Querier: q, catchUp: q.catchUp}, nil
}

// Query answers about order from the last catch-up: the event it stored
// about the order (stored again, a duplicate: the order's reconciliation
// names the callback), else nothing (the list would have had it), or the
// catch-up's failure (nothing is known).
func (s *Stripe) Query(_ context.Context, order string) (Answer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.listed:
		return Answer{}, errors.New("the Stripe events list was not read yet")
	case s.err != nil:
		return Answer{}, fmt.Errorf("the Stripe events list: %w", s.err)
	case s.found[order] != nil:
		return Answer{Body: s.found[order]}, nil
	}
	return Answer{NotFound: true}, nil
}

// catchUp lists the events created in [checkpoint, now-after] whose webhook
// was not delivered, stores each, and moves the checkpoint to now-after if
// all were stored. A failure of Stripe's, or of one event's storing, is
// counted and kept for Query; only the checkpoint's reading or writing
// failing, or ctx ending, is an error.
func (s *Stripe) catchUp(ctx context.Context, j *Job, cfg Config, src *Source) error {
	now := j.now().UTC()
	since, ok, err := j.Store.ReconcileCheckpoint(ctx, src.Name)
	if err != nil {
		return err
	}
	if !ok {
		since = now.Add(-min(cfg.GiveUp, stripeListedAtMost))
	}
	until := now.Add(-cfg.After).Truncate(time.Second)
	s.mu.Lock()
	if !until.After(since) { // listed up to this second already
		s.listed, s.err, s.found = true, nil, nil
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()

	params := &stripe.EventListParams{
		CreatedRange:    &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix(), LesserThanOrEqual: until.Unix()},
		DeliverySuccess: stripe.Bool(false),
		Types:           stripe.StringSlice(platform.StripeEventTypes),
	}
	params.Limit = stripe.Int64(100)
	found := map[string][]byte{}
	listed, fresh, outcome := 0, 0, OutcomeNothing
	var failed error
	// Stripe lists the newest first; the events are stored oldest first
	// (by created, then the reverse of the list), as their webhooks would
	// have come, so that a payment's failure listed with its later success
	// is not taken for the success's reversal while both wait to be read.
	var events []*stripe.Event
	for ev, err := range s.client.V1Events.List(ctx, params) {
		if err != nil {
			outcome, failed = stripeOutcome(err)
			break
		}
		listed++
		if ev.LastResponse == nil || len(ev.LastResponse.RawJSON) == 0 {
			outcome, failed = OutcomeUnreachable, fmt.Errorf("event %s: the SDK kept no JSON of it", ev.ID)
			break
		}
		events = append(events, ev)
	}
	slices.Reverse(events)
	sort.SliceStable(events, func(a, b int) bool { return events[a].Created < events[b].Created })
	// One event the database refuses does not keep the others from
	// being stored; the first failure is kept, and the checkpoint stays.
	for _, ev := range events {
		if ctx.Err() != nil {
			break
		}
		raw := ev.LastResponse.RawJSON
		out, stored, err := j.store(ctx, src, "", Answer{Body: raw})
		switch {
		case out == OutcomeNotOurs:
			// Refused as its webhook would be (a test-mode event for a
			// live source, another account's): counted, and left behind.
			if j.Counted != nil {
				j.Counted(src.Name, OutcomeNotOurs)
			}
			j.Log.Warn("reconcile: Stripe listed an event this source does not take", "source", src.Name, "event_id", ev.ID, "error", err)
			continue
		case err != nil:
			if failed == nil {
				outcome, failed = out, fmt.Errorf("event %s: %w", ev.ID, err)
				if out == OutcomeStoreFailed {
					failed = fmt.Errorf("%w: event %s: %w", ErrStoreFailed, ev.ID, err)
				}
			}
			continue
		}
		for _, st := range stored {
			if !st.Duplicate {
				fresh++
			}
		}
		if order := stripeOrder(src, raw); order != "" && (found[order] == nil || ev.Type == "payment_intent.succeeded") {
			found[order] = raw
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed == nil && fresh > 0 {
		outcome = OutcomeFound
	}
	if j.Counted != nil {
		j.Counted(src.Name, outcome)
	}
	s.mu.Lock()
	s.listed, s.err = true, failed
	if failed == nil {
		s.found = found
	}
	s.mu.Unlock()
	if failed != nil {
		j.Log.Warn("reconcile: Stripe's events list not stored to its end; the checkpoint stays", "source", src.Name, "outcome", outcome,
			"since", since, "listed", listed, "error", failed)
		return nil
	}
	if listed > 0 {
		j.Log.Info("reconcile: Stripe's events list read", "source", src.Name, "since", since, "until", until, "listed", listed, "new", fresh)
	}
	return j.Store.SetReconcileCheckpoint(ctx, src.Name, until, now)
}

// stripeOrder is the order an event stored is about (where the source's
// preset reads it), for Query.
func stripeOrder(src *Source, raw []byte) string {
	cbs, err := src.Answers.ReadAnswer("", raw)
	if err != nil || len(cbs) == 0 {
		return ""
	}
	if ev, ok := cbs[0].Event.(callback.PaymentEvent); ok {
		return ev.OrderCode
	}
	return ""
}

// stripeOutcome names a failed list request: Stripe's error answers
// (401 for a key refused, 429, 5xx) are refused; anything else did not
// reach it.
func stripeOutcome(err error) (string, error) {
	if o := queryOutcome(err, Answer{}); o == OutcomeThrottled {
		return o, err
	}
	var se *stripe.Error
	if errors.As(err, &se) {
		return OutcomeRefused, fmt.Errorf("%w: %d %s %s", ErrRefused, se.HTTPStatusCode, se.Type, se.Msg)
	}
	return OutcomeUnreachable, err
}
