// Package chaos_test checks the worker's promises under a seeded storm of
// faults, with two workers on one database and broker, in both batch
// settings: handler errors, handler timeouts (a handler that respects its
// context and one that ignores it), panics, network errors inside
// handlers, callgate's database "away" for a handler, rows held by another
// session, duplicate announcements, and worker restarts. At the end, for
// every callback: attempts = the failures injected into it + 1; no attempt
// started before the backoff its predecessor recorded; no two callbacks of
// a key ran at once and their effects follow receive order; each effect
// happened once.
//
// `make test` runs seed 20261201; `make fuzz` random ones (FuzzChaos). A
// failure prints its seed: CALLGATE_CHAOS_SEED=<seed> go test
// ./test/chaos/ runs it again.
package chaos_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/logistics"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

const (
	seedDefault    = 20261201
	callbacksTotal = 60
	keysTotal      = 15
	handlerTimeout = time.Second // a slow commit on a busy machine must not look like a timeout
	backoffInitial = 100 * time.Millisecond
)

// FuzzChaos runs the storm of each seed with batch_size 1 and 64.
func FuzzChaos(f *testing.F) {
	f.Add(int64(seedDefault))
	if s := os.Getenv("CALLGATE_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f.Fatalf("CALLGATE_CHAOS_SEED=%q is not a number", s)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("chaos: FAILED with seed %d; run it again with CALLGATE_CHAOS_SEED=%d go test -run FuzzChaos ./test/chaos/", seed, seed)
			}
		})
		for _, bs := range []int{1, 64} {
			storm(t, seed, bs)
		}
	})
}

// Faults injected into an attempt. The counted ones are the callback's
// failed attempts; the others must use none.
const (
	faultError      = "error"      // a retryable error: counted
	faultTimeout    = "timeout"    // sleeps past the deadline, respecting its context: counted
	faultStubborn   = "stubborn"   // sleeps past the deadline, ignoring its context: counted
	faultNetwork    = "network"    // a call to a refused port: counted
	faultPanic      = "panic"      // the last attempt: FAILED for good
	faultDBAway     = "db-away"    // callgate's database "away" for the handler: not counted
	faultContention = "contention" // a deadlock reported by the server: not counted
)

// plan is what the storm does to one callback: the faults of its attempts
// in order (the attempt after them succeeds, unless the last is a panic),
// and the uncounted faults thrown in on the way.
type plan struct {
	counted   []string
	uncounted map[int]string // attempt number -> one uncounted fault before it runs
}

func makePlans(r *rand.Rand, n int) []plan {
	counted := []string{faultError, faultTimeout, faultStubborn, faultNetwork}
	plans := make([]plan, n)
	for i := range plans {
		p := plan{uncounted: map[int]string{}}
		for range r.IntN(3) {
			p.counted = append(p.counted, counted[r.IntN(len(counted))])
		}
		if r.IntN(12) == 0 {
			p.counted = append(p.counted, faultPanic)
		}
		for a := 1; a <= len(p.counted)+1; a++ {
			if r.IntN(5) == 0 {
				p.uncounted[a] = []string{faultDBAway, faultContention}[r.IntN(2)]
			}
		}
		plans[i] = p
	}
	return plans
}

// attemptsWanted is how many attempts p's callback ends with, and its
// final status.
func (p plan) attemptsWanted() (int, callback.Status) {
	if n := len(p.counted); n > 0 && p.counted[n-1] == faultPanic {
		return n, callback.StatusFailed
	}
	return len(p.counted) + 1, callback.StatusSuccess
}

// violations collects what the handler saw go wrong.
type violations struct {
	mu   sync.Mutex
	list []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.list = append(v.list, fmt.Sprintf(format, args...))
}

// storm runs one seed with one batch size.
func storm(t *testing.T, seed int64, batchSize int) {
	testenv.ManyConnections(t) // workers started and killed over a pool of 24
	r := rand.New(rand.NewPCG(uint64(seed), uint64(batchSize)))
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Worker.BatchSize = batchSize
		c.Worker.HandlerTimeout = handlerTimeout
		c.Worker.ShutdownTimeout = 300 * time.Millisecond
		c.Scheduler.Compensation.Interval = 100 * time.Millisecond
		c.Scheduler.OutboxRelay.Interval = 200 * time.Millisecond
		c.Scheduler.Lease = 2 * time.Second
		for i := range c.Sources {
			c.Sources[i].Retry = source.Retry{MaxAttempts: 10, Initial: backoffInitial, Max: 2 * backoffInitial}
		}
		c.MySQL.MaxOpenConns = 24
		c.MySQL.MaxIdleConns = 4
	})
	st := testenv.Store(t, cfg)
	_, err := st.SQL.Exec(`CREATE TABLE chaos_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, business_key VARCHAR(191) NOT NULL,
		log_id BIGINT NOT NULL, UNIQUE KEY uq_chaos_log (log_id))`)
	require.NoError(t, err)

	plans := makePlans(r, callbacksTotal)
	ids := make([]int64, callbacksTotal)
	planOf := map[int64]plan{}
	keyOf := map[int64]string{}
	for i := range ids {
		key := fmt.Sprintf("K-%02d", i%keysTotal)
		now := time.Now().UTC()
		due := now.Add(time.Minute) // as the gateway stores it: the safety net a minute on
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: callback.KindPayment, EventID: fmt.Sprintf("chaos-%d", i),
			BusinessKey: key, Payload: []byte(fmt.Sprintf(`{"orderCode":%q,"paymentNo":"P-%d","amount":1,"status":"SUCCESS"}`, key, i)),
			TraceID: fmt.Sprintf("%032x", i+1), ReceivedAt: now, NextAttemptAt: &due})
		require.NoError(t, err)
		ids[i], planOf[res.ID], keyOf[res.ID] = res.ID, plans[i], key
	}

	refused := refusedURL(t)
	var viol violations
	var mu sync.Mutex
	running := map[string]int64{} // key -> the callback of it now running
	calls := map[int64]map[int]int{}
	var panics atomic.Int64
	handler := func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		now := time.Now()
		if !cb.Due(now) {
			viol.add("callback %d ran at %s, before its backoff ended at %s", cb.ID, now.Format(time.RFC3339Nano), cb.RetryAfter.Format(time.RFC3339Nano))
		}
		attempt := cb.Attempts + 1
		p := planOf[cb.ID]
		mu.Lock()
		if other, busy := running[cb.BusinessKey]; busy && other != cb.ID {
			viol.add("callbacks %d and %d of key %s ran at once", other, cb.ID, cb.BusinessKey)
		}
		running[cb.BusinessKey] = cb.ID
		if calls[cb.ID] == nil {
			calls[cb.ID] = map[int]int{}
		}
		calls[cb.ID][attempt]++
		first := calls[cb.ID][attempt] == 1
		mu.Unlock()
		defer func() {
			mu.Lock()
			if running[cb.BusinessKey] == cb.ID {
				delete(running, cb.BusinessKey)
			}
			mu.Unlock()
		}()
		if f, ok := p.uncounted[attempt]; ok && first {
			switch f {
			case faultDBAway:
				return fmt.Errorf("chaos: %w", &store.DBError{Err: sql.ErrConnDone})
			case faultContention:
				return fmt.Errorf("chaos: %w", tx.WithContext(ctx).Exec(`SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'chaos deadlock'`).Error)
			}
		}
		if attempt <= len(p.counted) {
			switch p.counted[attempt-1] {
			case faultError:
				return errors.New("chaos: the order service said no")
			case faultTimeout:
				select {
				case <-time.After(2 * handlerTimeout):
				case <-ctx.Done():
				}
				return ctx.Err()
			case faultStubborn:
				time.Sleep(2 * handlerTimeout)
				return nil
			case faultNetwork:
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, refused, nil)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					return errors.New("chaos: the refused port answered")
				}
				return fmt.Errorf("chaos: error calling the order service: %w", err)
			case faultPanic:
				panics.Add(1)
				panic("chaos: a handler bug")
			}
		}
		if err := tx.WithContext(ctx).Exec(`INSERT INTO chaos_effects (business_key, log_id) VALUES (?, ?)`, cb.BusinessKey, cb.ID).Error; err != nil {
			return fmt.Errorf("chaos: error writing the effect: %w", err)
		}
		return out.Add(ctx, callback.Message{RoutingKey: "chaos.done", Payload: map[string]any{"log_id": cb.ID}})
	}
	reg := callback.NewRegistry()
	reg.Register(callback.KindPayment, callback.HandlerFunc(handler))
	reg.Register(callback.KindLogistics, logistics.Handler{})

	var workers []*testenv.Worker
	start := func(i int) *testenv.Worker {
		wcfg := *cfg
		wcfg.Worker.ID = fmt.Sprintf("chaos-w%d", i)
		return testenv.StartWorker(t, &wcfg, worker.Options{Registry: reg})
	}
	workers = append(workers, start(1), start(2))

	// The storm: announcements shuffled, in groups, some twice; rows held
	// by another session; a worker restarted now and then.
	order := slices.Clone(ids)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	stop := make(chan struct{})
	var storms sync.WaitGroup
	storms.Go(func() { holdRows(st, ids, rand.New(rand.NewPCG(uint64(seed), 7)), stop) })
	for len(order) > 0 {
		n := min(len(order), 1+r.IntN(8))
		group := order[:n]
		order = order[n:]
		announce(t, cfg, group)
		if r.IntN(4) == 0 {
			announce(t, cfg, group) // a duplicate announcement
		}
		if r.IntN(10) == 0 {
			i := r.IntN(len(workers))
			require.NoError(t, workers[i].Stop())
			workers[i] = start(10 + i)
		}
		time.Sleep(time.Duration(r.IntN(50)) * time.Millisecond)
	}

	// Every callback settles.
	require.Eventually(t, func() bool {
		var pending int
		return st.SQL.QueryRow(`SELECT COUNT(*) FROM callback_log WHERE status = 'PENDING'`).Scan(&pending) == nil && pending == 0
	}, 3*time.Minute, 100*time.Millisecond, "bs=%d: every callback settles", batchSize)
	close(stop)
	storms.Wait()

	viol.mu.Lock()
	require.Empty(t, viol.list, "bs=%d", batchSize)
	viol.mu.Unlock()
	effects := map[string][]int64{}
	rows, err := st.SQL.Query(`SELECT business_key, log_id FROM chaos_effects ORDER BY id`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	once := map[int64]int{}
	for rows.Next() {
		var key string
		var id int64
		require.NoError(t, rows.Scan(&key, &id))
		effects[key] = append(effects[key], id)
		once[id]++
	}
	require.NoError(t, rows.Err())
	for _, id := range ids {
		p := planOf[id]
		wantAttempts, wantStatus := p.attemptsWanted()
		row, err := st.GetCallback(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, wantStatus, row.Status, "bs=%d callback %d, plan %v: status (last error %v)", batchSize, id, p.counted, row.LastError)
		require.Equal(t, wantAttempts, row.Attempts, "bs=%d callback %d, plan %v: attempts = failures injected + 1", batchSize, id, p.counted)
		var att []callback.Attempt
		require.NoError(t, st.DB.Where("log_id = ?", id).Order("attempt").Find(&att).Error)
		require.Len(t, att, wantAttempts, "bs=%d callback %d: one row per attempt", batchSize, id)
		for i := 1; i < len(att); i++ {
			// Equal jitter: the next attempt comes at least half the
			// backoff after the one before it.
			require.False(t, att[i].StartedAt.Before(att[i-1].FinishedAt.Add(backoffInitial/2-5*time.Millisecond)),
				"bs=%d callback %d: attempt %d started %s after attempt %d finished, before its backoff", batchSize, id, i+1,
				att[i].StartedAt.Sub(att[i-1].FinishedAt), i)
		}
		if batchSize == 1 {
			// One transaction per callback: one handler run per attempt,
			// plus one for each uncounted fault (its run was not an
			// attempt). A batch runs its callbacks again one by one when
			// any of them fails, so there a run is not an attempt.
			for a := 1; a <= wantAttempts; a++ {
				want := 1
				if _, ok := p.uncounted[a]; ok {
					want = 2
				}
				mu.Lock()
				got := calls[id][a]
				mu.Unlock()
				require.Equal(t, want, got, "bs=1 callback %d attempt %d: handler runs (plan %v, uncounted %v)", id, a, p.counted, p.uncounted)
			}
		}
		if wantStatus == callback.StatusSuccess {
			require.Equal(t, 1, once[id], "bs=%d callback %d: its effect happened once", batchSize, id)
		} else {
			require.Zero(t, once[id], "bs=%d callback %d: a FAILED callback has no effect", batchSize, id)
		}
	}
	for key, got := range effects {
		require.True(t, slices.IsSorted(got), "bs=%d key %s: effects in receive order: %v", batchSize, key, got)
	}
	var slowest float64
	require.NoError(t, st.SQL.QueryRow(`SELECT COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, received_at, processed_at)), 0) / 1e6 FROM callback_log`).Scan(&slowest))
	t.Logf("bs=%d: %d callbacks, %d panics injected, all promises held; the slowest settled %.1f s after it was stored",
		batchSize, len(ids), panics.Load(), slowest)
	for _, w := range workers {
		require.NoError(t, w.Stop())
	}
}

// announce puts one announcement of ids on the payment queue.
func announce(t *testing.T, cfg *config.Config, ids []int64) {
	t.Helper()
	body, err := json.Marshal(map[string][]int64{"log_ids": ids})
	require.NoError(t, err)
	testenv.Publish(t, cfg, callback.KindPayment, string(body))
}

// holdRows holds a random callback's row, or a random key's, in a session
// of its own for a while, again and again, until stop.
func holdRows(st *testenv.TestStore, ids []int64, r *rand.Rand, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(100+r.IntN(300)) * time.Millisecond):
		}
		tx, err := st.SQL.BeginTx(context.Background(), nil)
		if err != nil {
			continue
		}
		if r.IntN(2) == 0 {
			var got int64
			_ = tx.QueryRow(`SELECT id FROM callback_log WHERE id = ? FOR UPDATE`, ids[r.IntN(len(ids))]).Scan(&got)
		} else {
			var got string
			_ = tx.QueryRow(`SELECT business_key FROM callback_key WHERE kind = 'payment' AND business_key = ? FOR UPDATE`,
				fmt.Sprintf("K-%02d", r.IntN(keysTotal))).Scan(&got)
		}
		time.Sleep(time.Duration(100+r.IntN(400)) * time.Millisecond)
		_ = tx.Rollback()
	}
}

// refusedURL is an address where nothing listens.
func refusedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr
}
