package platformsim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Stripe is Stripe's events list (GET /v1/events,
// docs.stripe.com/api/events/list). A request must carry the secret key
// as Stripe takes it (Authorization: Bearer <key>, or Basic with the key
// as the user and no password); else 401 with Stripe's error JSON. The
// list is newest first; limit (1 to 100, default 10), starting_after,
// created (an exact second, or [gt], [gte], [lt], [lte]), type or types[]
// (up to 20; stripe-go sends types[0], types[1], ...) and
// delivery_success filter and page it as Stripe does, has_more saying
// whether a next page exists. The events are served byte for byte as
// added: the same JSON a test signs and posts as the webhook.
type Stripe struct {
	URL string
	misbehaving

	key string

	mu       sync.Mutex
	events   []stripeEvent // in the order added
	down     bool
	revoked  bool
	lists    []url.Values
	refusals int
}

type stripeEvent struct {
	id, typ   string
	created   int64
	delivered bool
	raw       json.RawMessage
}

// StartStripe serves the API until the test ends; key is the account's
// secret key.
func StartStripe(t testing.TB, key string) *Stripe {
	t.Helper()
	s := &Stripe{key: key}
	srv := httptest.NewServer(s.wrap(http.HandlerFunc(s.serve)))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// AddEvent adds event (a Stripe Event's JSON: id, type, created are read
// from it); delivered says whether every webhook endpoint got it (Stripe's
// delivery_success).
func (s *Stripe) AddEvent(t testing.TB, event []byte, delivered bool) {
	t.Helper()
	var ev struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Type    string `json:"type"`
		Created int64  `json:"created"`
	}
	if err := json.Unmarshal(event, &ev); err != nil || ev.Object != "event" || !strings.HasPrefix(ev.ID, "evt_") || ev.Type == "" || ev.Created == 0 {
		t.Fatalf("platformsim: not a Stripe event (%v): %s", err, event)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, stripeEvent{id: ev.ID, typ: ev.Type, created: ev.Created, delivered: delivered, raw: slices.Clone(event)})
}

// Down makes every request answer 503, as Stripe does when it cannot
// serve (true), or be served.
func (s *Stripe) Down(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Revoke makes the key refused, as a rolled or deleted key is (true).
func (s *Stripe) Revoke(revoked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = revoked
}

// Lists are the queries of the list requests served, in order.
func (s *Stripe) Lists() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]url.Values, len(s.lists))
	for i, q := range s.lists {
		out[i] = cloneValues(q)
	}
	return out
}

// Refusals counts the requests refused for their key.
func (s *Stripe) Refusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusals
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

func (s *Stripe) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down, revoked := s.down, s.revoked
	s.mu.Unlock()
	if down {
		stripeError(w, http.StatusServiceUnavailable, "api_error", "", "Stripe is temporarily unavailable.")
		return
	}
	key, ok := s.requestKey(r)
	if !ok {
		s.refused()
		stripeError(w, http.StatusUnauthorized, "invalid_request_error", "",
			"You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').")
		return
	}
	if key != s.key || revoked {
		s.refused()
		stripeError(w, http.StatusUnauthorized, "invalid_request_error", "", "Invalid API Key provided: "+redactKey(key))
		return
	}
	if r.URL.Path != "/v1/events" {
		stripeError(w, http.StatusNotFound, "invalid_request_error", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+").")
		return
	}
	if r.Method != http.MethodGet {
		stripeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+").")
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	s.lists = append(s.lists, cloneValues(q))
	s.mu.Unlock()
	page, hasMore, param, msg := s.list(q)
	if msg != "" {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", param, msg)
		return
	}
	data := make([]json.RawMessage, len(page))
	for i, ev := range page {
		data[i] = ev.raw
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_sim"+strconv.Itoa(len(s.Lists())))
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "url": "/v1/events", "has_more": hasMore, "data": data})
}

func (s *Stripe) refused() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusals++
}

// requestKey is the key of a Bearer or Basic Authorization.
func (s *Stripe) requestKey(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if k, ok := strings.CutPrefix(h, "Bearer "); ok && k != "" {
		return k, true
	}
	if b, ok := strings.CutPrefix(h, "Basic "); ok {
		raw, err := base64.StdEncoding.DecodeString(b)
		if user, _, _ := strings.Cut(string(raw), ":"); err == nil && user != "" {
			return user, true
		}
	}
	return "", false
}

func redactKey(k string) string {
	if len(k) <= 12 {
		return strings.Repeat("*", len(k))
	}
	return k[:8] + strings.Repeat("*", len(k)-12) + k[len(k)-4:]
}

var typesParam = regexp.MustCompile(`^types\[\d*\]$`)

// list applies q to the events; msg says why it is refused (param: which).
func (s *Stripe) list(q url.Values) (page []stripeEvent, hasMore bool, param, msg string) {
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return nil, false, "limit", "This value must be greater than or equal to 1 and less than or equal to 100."
		}
		limit = n
	}
	var types []string
	for k, vs := range q {
		if typesParam.MatchString(k) {
			types = append(types, vs...)
		}
	}
	if len(types) > 20 {
		return nil, false, "types", "You may pass at most 20 types."
	}
	if len(types) > 0 && q.Get("type") != "" {
		return nil, false, "types", "You may pass either `type` or `types`, but not both."
	}
	var delivered *bool
	if v := q.Get("delivery_success"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, false, "delivery_success", "Invalid boolean: " + v
		}
		delivered = &b
	}
	bounds := map[string]int64{}
	for _, op := range []string{"", "gt", "gte", "lt", "lte"} {
		k := "created"
		if op != "" {
			k += "[" + op + "]"
		}
		if v := q.Get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, false, k, "Invalid integer: " + v
			}
			bounds[op] = n
		}
	}
	match := func(ev stripeEvent) bool {
		if delivered != nil && ev.delivered != *delivered {
			return false
		}
		if len(types) > 0 && !slices.Contains(types, ev.typ) {
			return false
		}
		if t := q.Get("type"); t != "" && !wildcard(t, ev.typ) {
			return false
		}
		for op, n := range bounds {
			c := ev.created
			if (op == "" && c != n) || (op == "gt" && c <= n) || (op == "gte" && c < n) || (op == "lt" && c >= n) || (op == "lte" && c > n) {
				return false
			}
		}
		return true
	}
	s.mu.Lock()
	all := slices.Clone(s.events)
	s.mu.Unlock()
	// Newest first; of one second, the last created first.
	slices.Reverse(all)
	slices.SortStableFunc(all, func(a, b stripeEvent) int { return int(b.created - a.created) })
	start := 0
	if after := q.Get("starting_after"); after != "" {
		i := slices.IndexFunc(all, func(ev stripeEvent) bool { return ev.id == after })
		if i < 0 {
			return nil, false, "starting_after", fmt.Sprintf("No such event: '%s'", after)
		}
		start = i + 1
	}
	for _, ev := range all[start:] {
		if !match(ev) {
			continue
		}
		if len(page) == limit {
			return page, true, "", ""
		}
		page = append(page, ev)
	}
	return page, false, "", ""
}

// wildcard matches Stripe's type filter (a name, or a group with *).
func wildcard(pattern, typ string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(typ, prefix)
	}
	return pattern == typ
}

// stripeError writes Stripe's error JSON.
func stripeError(w http.ResponseWriter, status int, typ, param, msg string) {
	e := map[string]any{"type": typ, "message": msg}
	if param != "" {
		e["param"] = param
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}
