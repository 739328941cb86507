//go:build fault

package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/signature"
	"callgate/internal/testenv"
)

// loadSpec describes the traffic of a platform: one signed paydemo callback
// per order (Copies times, concurrently, with the same webhook-id), each
// retried after a transport error or a 5xx until it is answered 200, as a
// platform would.
type loadSpec struct {
	URL string
	// URLs, when set, are several gateways: each try goes to the next
	// (a platform behind a load balancer), so a retry reaches a live one.
	URLs   []string
	Secret string
	Orders []string
	// First is the index of Orders[0] among the orders testenv.CreateOrders
	// made: order First+i has amount 1000+First+i.
	First int
	// Copies is how many times each callback is sent at once (default 1).
	Copies int
	// Rate is how many new callbacks start per second; 0: as fast as the
	// gateway answers.
	Rate float64
	// Workers is the number of concurrent senders (default 32).
	Workers int
	// Pause between retries of one request (default 100ms, plus jitter).
	Pause time.Duration
	// Limit bounds the whole load (default 3m, and faultLimit more for
	// each pause, the longest a fault may take to be in place): what is
	// not answered 200 by then counts as given up.
	Limit time.Duration
	// Pauses are indexes of Orders (ascending) the load stops before
	// until the test calls resume, once per pause: what must meet a fault
	// is sent only once the fault is in place, and the load cannot be
	// over before that, however long the fault took to set up.
	Pauses []int
}

// load is a running load.
type load struct {
	t       *testing.T
	spec    loadSpec
	started time.Time
	done    chan struct{}
	client  *http.Client
	gates   []chan struct{} // one per spec.Pauses, closed by resume
	resumes int             // how many gates resume closed (the test's goroutine only)

	// Per order: the log id of its 200s (0: none yet), how many 200s said
	// duplicate:false, and whether two 200s named different log ids.
	logIDs   []atomic.Int64
	fresh    []atomic.Int32
	answered []atomic.Int32 // 200s received (of Copies)
	okAt     []atomic.Int64 // when its first 200 came (UnixNano; 0: none yet)

	sent, ok, s503, s5xx, s4xx, transport, retries, mismatch atomic.Int64
	completed                                                atomic.Int64 // orders with every copy answered 200
	gaveUp                                                   atomic.Int64
	firstErr                                                 atomic.Value // string
	wall                                                     time.Duration

	latMu sync.Mutex
	lat   []time.Duration // of the 200 answers
	latAt []time.Time     // when each of lat was answered
}

// startLoad runs spec in the background; wait returns when every request
// got its 200 or gave up.
func startLoad(t *testing.T, spec loadSpec) *load {
	if spec.Copies == 0 {
		spec.Copies = 1
	}
	if spec.Workers == 0 {
		spec.Workers = 32
	}
	if spec.Pause == 0 {
		spec.Pause = 100 * time.Millisecond
	}
	if spec.Limit == 0 {
		spec.Limit = 3*time.Minute + time.Duration(len(spec.Pauses))*faultLimit
	}
	for i, p := range spec.Pauses {
		require.True(t, p > 0 && p < len(spec.Orders) && (i == 0 || p > spec.Pauses[i-1]),
			"pauses %v: ascending indexes inside the %d orders", spec.Pauses, len(spec.Orders))
	}
	l := &load{
		t:       t,
		spec:    spec,
		started: time.Now(),
		done:    make(chan struct{}),
		client: &http.Client{
			Timeout: 15 * time.Second,
			Transport: &http.Transport{
				MaxIdleConns:        spec.Workers * 2,
				MaxIdleConnsPerHost: spec.Workers * 2,
				IdleConnTimeout:     30 * time.Second,
			},
		},
		logIDs:   make([]atomic.Int64, len(spec.Orders)),
		fresh:    make([]atomic.Int32, len(spec.Orders)),
		answered: make([]atomic.Int32, len(spec.Orders)),
		okAt:     make([]atomic.Int64, len(spec.Orders)),
		gates:    make([]chan struct{}, len(spec.Pauses)),
	}
	for i := range l.gates {
		l.gates[i] = make(chan struct{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), spec.Limit)
	t.Cleanup(func() { cancel(); <-l.done })
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		var tick *time.Ticker
		if spec.Rate > 0 {
			tick = time.NewTicker(time.Duration(float64(time.Second) / spec.Rate))
			defer tick.Stop()
		}
		pause := 0 // the next of spec.Pauses
		for i := range spec.Orders {
			if pause < len(spec.Pauses) && i == spec.Pauses[pause] {
				select {
				case <-l.gates[pause]:
				case <-ctx.Done():
					return
				}
				pause++
			}
			if tick != nil {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
			for range spec.Copies {
				select {
				case jobs <- i:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for range spec.Workers {
		wg.Go(func() {
			for i := range jobs {
				l.send(ctx, i)
			}
		})
	}
	go func() {
		wg.Wait()
		cancel()
		l.wall = time.Since(l.started)
		l.client.CloseIdleConnections()
		close(l.done)
	}()
	return l
}

// wait blocks until the load is over.
func (l *load) wait() { <-l.done }

// resume lets the load go on past its next pause.
func (l *load) resume() {
	l.t.Helper()
	require.Less(l.t, l.resumes, len(l.gates), "resume: the load has no pause left (pauses %v)", l.spec.Pauses)
	close(l.gates[l.resumes])
	l.resumes++
}

// send delivers one copy of order i's callback until it is answered 200.
func (l *load) send(ctx context.Context, i int) {
	code := l.spec.Orders[i]
	body := testenv.PaymentBody(code, paymentNo(code), int64(1000+l.spec.First+i))
	msgID := "msg_" + code
	for try := 0; ; try++ {
		if try > 0 {
			l.retries.Add(1)
			select {
			case <-time.After(l.spec.Pause + rand.N(l.spec.Pause)):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			l.gaveUp.Add(1)
			l.fail(fmt.Sprintf("%s: gave up after %d tries: load limit reached", code, try))
			return
		}
		began := time.Now()
		status, raw, err := l.post(ctx, l.target(i+try), msgID, body)
		took := time.Since(began)
		l.sent.Add(1)
		switch {
		case err != nil:
			l.transport.Add(1)
			continue
		case status == http.StatusOK:
		case status == http.StatusServiceUnavailable:
			l.s503.Add(1)
			continue
		case status >= 500:
			l.s5xx.Add(1)
			l.fail(fmt.Sprintf("%s: %d %s", code, status, raw))
			continue
		default:
			// A 4xx does not get better by resending: the test is wrong.
			l.s4xx.Add(1)
			l.gaveUp.Add(1)
			l.fail(fmt.Sprintf("%s: %d %s", code, status, raw))
			return
		}
		var a struct {
			Status    string `json:"status"`
			LogID     int64  `json:"log_id"`
			Duplicate bool   `json:"duplicate"`
		}
		if err := json.Unmarshal(raw, &a); err != nil || a.Status != "accepted" || a.LogID <= 0 {
			l.s5xx.Add(1)
			l.fail(fmt.Sprintf("%s: 200 with an unexpected body %q", code, raw))
			continue
		}
		l.ok.Add(1)
		l.okAt[i].CompareAndSwap(0, time.Now().UnixNano())
		l.latMu.Lock()
		l.lat = append(l.lat, took)
		l.latAt = append(l.latAt, began.Add(took))
		l.latMu.Unlock()
		if !a.Duplicate {
			l.fresh[i].Add(1)
		}
		if !l.logIDs[i].CompareAndSwap(0, a.LogID) && l.logIDs[i].Load() != a.LogID {
			l.mismatch.Add(1)
			l.fail(fmt.Sprintf("%s: answered log ids %d and %d", code, l.logIDs[i].Load(), a.LogID))
		}
		if int(l.answered[i].Add(1)) == l.spec.Copies {
			l.completed.Add(1)
		}
		return
	}
}

// target is the gateway of try n.
func (l *load) target(n int) string {
	if len(l.spec.URLs) == 0 {
		return l.spec.URL
	}
	return l.spec.URLs[n%len(l.spec.URLs)]
}

func (l *load) post(ctx context.Context, url, msgID string, body []byte) (int, []byte, error) {
	ts := time.Now()
	sig, err := signature.SignStandardWebhooks(l.spec.Secret, msgID, ts, body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/callbacks/paydemo", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", msgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, raw, nil
}

func (l *load) fail(msg string) { l.firstErr.CompareAndSwap(nil, msg) }

// accepted returns the log id answered for every order (0: none).
func (l *load) accepted() []int64 {
	out := make([]int64, len(l.logIDs))
	for i := range l.logIDs {
		out[i] = l.logIDs[i].Load()
	}
	return out
}

// paymentNo is the payment number the load sends for an order.
func paymentNo(code string) string { return "PAY-" + code }

// figures is the load's one-line account.
func (l *load) figures() string {
	return fmt.Sprintf("sent=%d 200s=%d 503s=%d other5xx=%d 4xx=%d transport_errs=%d retries=%d %s",
		l.sent.Load(), l.ok.Load(), l.s503.Load(), l.s5xx.Load(), l.s4xx.Load(), l.transport.Load(), l.retries.Load(), l.latency())
}

// p99Between is the 99th percentile of the 200 answers given between from
// and to, and how many there were.
func (l *load) p99Between(from, to time.Time) (time.Duration, int) {
	l.latMu.Lock()
	var lat []time.Duration
	for i, at := range l.latAt {
		if !at.Before(from) && at.Before(to) {
			lat = append(lat, l.lat[i])
		}
	}
	l.latMu.Unlock()
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, int(0.99*float64(len(lat))))].Round(100 * time.Microsecond), len(lat)
}

// answeredBetween returns the orders (indexes) whose first 200 came
// between from and to.
func (l *load) answeredBetween(from, to time.Time) []int {
	var out []int
	for i := range l.okAt {
		at := l.okAt[i].Load()
		if at >= from.UnixNano() && at < to.UnixNano() {
			out = append(out, i)
		}
	}
	return out
}

// firstAnsweredAfter is when the first 200 after t came (zero: none).
func (l *load) firstAnsweredAfter(t time.Time) time.Time {
	var first int64
	for i := range l.okAt {
		if at := l.okAt[i].Load(); at > t.UnixNano() && (first == 0 || at < first) {
			first = at
		}
	}
	if first == 0 {
		return time.Time{}
	}
	return time.Unix(0, first)
}

// latency summarises how long the 200 answers took.
func (l *load) latency() string {
	l.latMu.Lock()
	lat := slices.Clone(l.lat)
	l.latMu.Unlock()
	if len(lat) == 0 {
		return "latency200=none"
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration {
		return lat[min(len(lat)-1, int(f*float64(len(lat))))].Round(100 * time.Microsecond)
	}
	return fmt.Sprintf("latency200_p50=%s p99=%s max=%s", q(0.50), q(0.99), lat[len(lat)-1].Round(100*time.Microsecond))
}
