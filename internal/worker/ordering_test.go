package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// keyTracker records, across every worker of a test, the handlers running
// per business key, and whether two ever ran for the same key at once.
type keyTracker struct {
	mu         sync.Mutex
	running    map[string]int
	violations []string
}

func newKeyTracker() *keyTracker { return &keyTracker{running: map[string]int{}} }

func (k *keyTracker) enter(key string, logID int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running[key]++
	if n := k.running[key]; n > 1 {
		k.violations = append(k.violations, fmt.Sprintf("key %s: log %d started while %d other(s) of the key ran", key, logID, n-1))
	}
}

func (k *keyTracker) exit(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running[key]--
}

func (k *keyTracker) Violations() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.violations...)
}

// effectsRegistry returns a registry whose payment handler sleeps 0-3 ms and
// records (business_key, log id) in test_effects inside the worker's
// transaction, so the effect commits with the SUCCESS or not at all.
func effectsRegistry(tr *keyTracker) *callback.Registry {
	reg := callback.NewRegistry()
	reg.Register(callback.KindPayment, callback.HandlerFunc(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, _ callback.Outbox) error {
		tr.enter(cb.BusinessKey, cb.ID)
		defer tr.exit(cb.BusinessKey)
		time.Sleep(time.Duration(rand.Int64N(int64(3*time.Millisecond) + 1)))
		return tx.WithContext(ctx).Exec("INSERT INTO test_effects (business_key, log_id) VALUES (?, ?)", cb.BusinessKey, cb.ID).Error
	}))
	reg.Register(callback.KindLogistics, callback.HandlerFunc(func(context.Context, *gorm.DB, *callback.Log, callback.Outbox) error {
		return nil
	}))
	return reg
}

// newCallback is a PENDING callback not due for the compensation scan
// before ten minutes, so that only the test's announcements (and the
// workers' own wake-ups and re-announcements) drive it.
func newCallback(source, kind, key, eventID string, n int) *callback.Log {
	now := time.Now().UTC()
	due := now.Add(10 * time.Minute)
	return &callback.Log{
		Source: source, Kind: kind, BusinessKey: key, EventID: eventID,
		Payload: []byte(`{}`), TraceID: fmt.Sprintf("%032x", n+1),
		ReceivedAt: now, NextAttemptAt: &due,
	}
}

// insertCallbacks stores cbs one by one, in order, and returns their ids.
func insertCallbacks(t *testing.T, st *testenv.TestStore, cbs []*callback.Log) []int64 {
	t.Helper()
	ids := make([]int64, len(cbs))
	for i, cb := range cbs {
		res, err := st.InsertCallback(t.Context(), cb)
		require.NoError(t, err)
		require.False(t, res.Duplicate)
		ids[i] = res.ID
	}
	return ids
}

// announce publishes {"log_id":N} for every id to <prefix>.callbacks with
// routing key kind, on one confirm-mode channel, and waits for the confirms.
func announce(t *testing.T, cfg *config.Config, kind string, ids []int64) {
	t.Helper()
	conn, err := amqp.Dial(testenv.AMQPURL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.Confirm(false))
	dcs := make([]*amqp.DeferredConfirmation, 0, len(ids))
	for _, id := range ids {
		dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), cfg.AMQP.Prefix+".callbacks", kind, false, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent,
			Body: []byte(`{"log_id":` + strconv.FormatInt(id, 10) + `}`),
		})
		require.NoError(t, err)
		dcs = append(dcs, dc)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, dc := range dcs {
		ok, err := dc.WaitContext(ctx)
		require.NoError(t, err)
		require.True(t, ok, "broker nacked an announcement")
	}
}

// waitConsumers waits until queue has n consumers: the workers are
// subscribed (and so the topology is declared) before anything is announced.
func waitConsumers(t *testing.T, queue string, n int) {
	t.Helper()
	q := testenv.OpenQueue(t, queue)
	require.Eventually(t, func() bool {
		info, err := q.Channel().QueueDeclarePassive(queue, true, false, false, false, nil)
		return err == nil && info.Consumers == n
	}, 20*time.Second, 20*time.Millisecond, "%d consumers on %s", n, queue)
}

// countStatus counts the callbacks of kind with status.
func countStatus(t *testing.T, st *testenv.TestStore, kind string, status callback.Status) int {
	t.Helper()
	var n int64
	require.NoError(t, st.DB.Model(&callback.Log{}).Where("kind = ? AND status = ?", kind, status).Count(&n).Error)
	return int(n)
}

// waitAllSuccess waits until want callbacks of kind are SUCCESS, failing at
// once should any become FAILED, and failing should their count stop
// rising for stall (a loaded machine, another make test beside this one,
// makes the whole run slower; only a run that stops is wrong).
func waitAllSuccess(t *testing.T, st *testenv.TestStore, kind string, want int, stall time.Duration) {
	t.Helper()
	last, progressed := -1, time.Now()
	for {
		require.Zero(t, countStatus(t, st, kind, callback.StatusFailed), "no callback may fail")
		n := countStatus(t, st, kind, callback.StatusSuccess)
		if n == want {
			return
		}
		if n != last {
			last, progressed = n, time.Now()
		}
		require.Less(t, time.Since(progressed), stall, "all %d %s callbacks SUCCESS: %d after no progress for %s", want, kind, n, stall)
		time.Sleep(20 * time.Millisecond)
	}
}

const (
	orderingKeys    = 200
	orderingPerKey  = 20
	orderingTotal   = orderingKeys * orderingPerKey
	orderingWorkers = 4
)

// throughputRun is one run of 4,000 payment callbacks through 4 workers.
type throughputRun struct {
	cfg      *config.Config
	st       *testenv.TestStore
	tracker  *keyTracker
	ids      []int64
	keyOf    map[int64]string
	workers  []*testenv.Worker
	wallTime time.Duration
}

// startThroughputRun prepares a fresh database and prefix with the
// test_effects table and the callbacks keyed by keyFor(i) (i in insert
// order), and starts 4 workers on it with payment concurrency 16.
func startThroughputRun(t *testing.T, batchSize int, keyFor func(i int) string) *throughputRun {
	t.Helper()
	testenv.ManyConnections(t) // 4 pools of 24
	cfg := testenv.Config(t, func(c *config.Config) {
		if batchSize > 0 {
			c.Worker.BatchSize = batchSize
		}
		c.Worker.Kinds[callback.KindPayment] = worker.KindConfig{Concurrency: 16, Prefetch: 32}
		// 4 pools in one test against one MariaDB (max_connections 151):
		// 16 transactions plus the wake-ups, relay and compensation fit.
		c.MySQL.MaxOpenConns = 24
		c.MySQL.MaxIdleConns = 4
		// No safety net inside the run: a wake-up lost, or a callback
		// left waiting, cannot be rescued by the compensation job within
		// the run's 90 s, and fails it.
		c.Scheduler.Compensation.Threshold = 10 * time.Minute
	})
	st := testenv.Store(t, cfg)
	_, err := st.SQL.Exec(`CREATE TABLE test_effects (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		business_key VARCHAR(191) NOT NULL,
		log_id BIGINT NOT NULL)`)
	require.NoError(t, err)

	r := &throughputRun{cfg: cfg, st: st, tracker: newKeyTracker(), keyOf: map[int64]string{}}
	cbs := make([]*callback.Log, orderingTotal)
	for i := range cbs {
		cbs[i] = newCallback("paydemo", callback.KindPayment, keyFor(i), fmt.Sprintf("evt-%d", i), i)
	}
	r.ids = insertCallbacks(t, st, cbs)
	for i, id := range r.ids {
		r.keyOf[id] = cbs[i].BusinessKey
	}

	reg := effectsRegistry(r.tracker)
	for i := range orderingWorkers {
		// Same database, same prefix: four competing worker processes. Only
		// the worker id differs, so the attempts say who ran what.
		wcfg := *cfg
		wcfg.Worker.ID = fmt.Sprintf("w%d", i+1)
		r.workers = append(r.workers, testenv.StartWorker(t, &wcfg, worker.Options{Registry: reg}))
	}
	waitConsumers(t, cfg.AMQP.Prefix+"."+callback.KindPayment, orderingWorkers)
	return r
}

// run announces every callback and waits for all of them to be SUCCESS,
// timing from the first announcement to the last SUCCESS.
//
// The announcements go out shuffled (seeded, the seed is logged): in receive
// order, a key's callbacks are 200 messages apart while at most 128 are in
// flight over the 4 workers, so they never meet and the test passes even
// with the ordering check removed. Shuffled, a key's later callbacks often
// arrive first or while an earlier one runs, which is what happens when
// gateways, redeliveries and the compensation scan announce out of order,
// and the deferral and wake-up paths carry the load.
func (r *throughputRun) run(t *testing.T, seed uint64) {
	t.Helper()
	order := append([]int64(nil), r.ids...)
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	start := time.Now()
	announce(t, r.cfg, callback.KindPayment, order)
	waitAllSuccess(t, r.st, callback.KindPayment, orderingTotal, time.Minute)
	r.wallTime = time.Since(start)
}

func (r *throughputRun) stop(t *testing.T) {
	t.Helper()
	for _, w := range r.workers {
		require.NoError(t, w.Stop())
	}
}

func (r *throughputRun) rate() float64 { return float64(orderingTotal) / r.wallTime.Seconds() }

// TestPerKeyOrderingAcrossWorkers: 4 workers on one database and prefix,
// 200 keys x 20 callbacks received interleaved. No two callbacks of a key
// ever run at once, each key's effects follow receive order, and no
// callback is left waiting (the compensation job's safety net is out of
// reach). Not parallel: the throughput it logs would be distorted by
// tests running alongside.
func TestPerKeyOrderingAcrossWorkers(t *testing.T) {
	testenv.EachBatchSize(t, testPerKeyOrderingAcrossWorkers)
}

func testPerKeyOrderingAcrossWorkers(t *testing.T, batchSize int) {
	// Interleaved: round robin over the keys, so each key's 20 callbacks
	// are spread over the whole id range.
	seed := uint64(time.Now().UnixNano())
	t.Logf("announcement shuffle seed %d", seed)
	ordered := startThroughputRun(t, batchSize, func(i int) string { return fmt.Sprintf("ORD-%03d", i%orderingKeys) })
	ordered.run(t, seed)

	if v := ordered.tracker.Violations(); len(v) > 0 {
		require.Failf(t, "two callbacks of one key ran at the same time", "%d times, first: %v", len(v), v[:min(len(v), 5)])
	}

	type effect struct {
		BusinessKey string
		LogID       int64
	}
	var effects []effect
	require.NoError(t, ordered.st.DB.Raw("SELECT business_key, log_id FROM test_effects ORDER BY id").Scan(&effects).Error)
	require.Len(t, effects, orderingTotal, "exactly one effect per callback")
	byKey := map[string][]int64{}
	seen := map[int64]bool{}
	for _, e := range effects {
		require.False(t, seen[e.LogID], "log %d has two effects", e.LogID)
		seen[e.LogID] = true
		require.Equal(t, ordered.keyOf[e.LogID], e.BusinessKey, "effect of log %d under the wrong key", e.LogID)
		byKey[e.BusinessKey] = append(byKey[e.BusinessKey], e.LogID)
	}
	require.Len(t, byKey, orderingKeys)
	for key, ids := range byKey {
		require.Len(t, ids, orderingPerKey, "key %s", key)
		for i := 1; i < len(ids); i++ {
			require.Greater(t, ids[i], ids[i-1], "key %s ran out of receive order: %v", key, ids)
		}
	}

	// Every attempt succeeded at once, and all four workers took part.
	var perWorker []struct {
		WorkerID string
		N        int
	}
	require.NoError(t, ordered.st.DB.Raw("SELECT worker_id, COUNT(*) AS n FROM callback_attempt GROUP BY worker_id ORDER BY worker_id").Scan(&perWorker).Error)
	total := 0
	for _, w := range perWorker {
		total += w.N
	}
	require.Equal(t, orderingTotal, total, "one attempt per callback")
	require.Len(t, perWorker, orderingWorkers, "every worker processed callbacks: %v", perWorker)
	t.Logf("ordered: attempts per worker %v", perWorker)
	ordered.stop(t)

	// For the record, not asserted: what ordering costs against the same
	// load without it is the benchmark's to measure (make bench's drain);
	// a shared 2-core machine cannot hold a ratio in every run, and the
	// unordered run took half of this test's minute under the race
	// detector. A stall (a callback left to wait for the compensation
	// job) fails the run above: its safety net is 10 minutes away.
	t.Logf("ordered: %.0f cb/s (%s)", ordered.rate(), ordered.wallTime.Round(time.Millisecond))
}

// TestWorkloadIsolation: a payment handler that hangs holds only payment's
// slots; logistics callbacks keep flowing on their own consumer.
func TestWorkloadIsolation(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) {
		// One callback per transaction, so that two slots are two handlers
		// (with batches, a slot may gather all ten payments into one).
		c.Worker.BatchSize = 1
		c.Worker.Kinds[callback.KindPayment] = worker.KindConfig{Concurrency: 2, Prefetch: 4}
	})
	st := testenv.Store(t, cfg)

	release := make(chan struct{})
	var inPayment, maxInPayment atomic.Int32
	reg := callback.NewRegistry()
	reg.Register(callback.KindPayment, callback.HandlerFunc(func(ctx context.Context, _ *gorm.DB, _ *callback.Log, _ callback.Outbox) error {
		n := inPayment.Add(1)
		defer inPayment.Add(-1)
		for {
			m := maxInPayment.Load()
			if n <= m || maxInPayment.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	var logisticsDone atomic.Int32
	reg.Register(callback.KindLogistics, callback.HandlerFunc(func(context.Context, *gorm.DB, *callback.Log, callback.Outbox) error {
		logisticsDone.Add(1)
		return nil
	}))

	testenv.StartWorker(t, cfg, worker.Options{Registry: reg})
	// Registered after StartWorker, so it runs before the worker is stopped
	// should the test fail while payments are blocked.
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	waitConsumers(t, cfg.AMQP.Prefix+"."+callback.KindPayment, 1)
	waitConsumers(t, cfg.AMQP.Prefix+"."+callback.KindLogistics, 1)

	var payCbs, logCbs []*callback.Log
	for i := range 10 {
		payCbs = append(payCbs, newCallback("paydemo", callback.KindPayment, fmt.Sprintf("ORD-%d", i), fmt.Sprintf("pay-%d", i), i))
	}
	for i := range 20 {
		logCbs = append(logCbs, newCallback("shipdemo", callback.KindLogistics, fmt.Sprintf("WB-%d", i), fmt.Sprintf("WB-%d:1", i), 100+i))
	}
	payIDs := insertCallbacks(t, st, payCbs)
	logIDs := insertCallbacks(t, st, logCbs)

	// Payments first: by the time logistics arrive, payment's two slots are
	// taken by handlers that do not return.
	announce(t, cfg, callback.KindPayment, payIDs)
	require.Eventually(t, func() bool { return inPayment.Load() == 2 }, 10*time.Second, 20*time.Millisecond, "two payment handlers running")
	announce(t, cfg, callback.KindLogistics, logIDs)

	waitAllSuccess(t, st, callback.KindLogistics, 20, 15*time.Second)
	require.EqualValues(t, 20, logisticsDone.Load())
	require.Equal(t, 10, countStatus(t, st, callback.KindPayment, callback.StatusPending), "payments are still blocked")
	require.EqualValues(t, 2, inPayment.Load(), "payment runs at its own concurrency")

	unblock()
	waitAllSuccess(t, st, callback.KindPayment, 10, 15*time.Second)
	require.EqualValues(t, 2, maxInPayment.Load(), "never more than payment's concurrency at once")
}
