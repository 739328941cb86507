package store_test

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// idModes are the two ways a batch learns its rows' ids: from the INSERT
// itself (RETURNING, MariaDB) and with a read-back query (MySQL).
var idModes = []struct {
	name string
	set  func(*store.Batcher)
}{
	{"returning", func(*store.Batcher) {}},
	{"read-back", store.ReadBackIDs},
}

func TestBatcherSameAnswersAsOneInsertPerRequest(t *testing.T) {
	t.Parallel()
	for _, mode := range idModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testBatcherSameAnswersAsOneInsertPerRequest(t, mode.set)
		})
	}
}

func testBatcherSameAnswersAsOneInsertPerRequest(t *testing.T, mode func(*store.Batcher)) {
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	b := store.NewBatcher(st.Store, 2, 64, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	defer b.Close()
	mode(b)

	// One event already stored before the batches.
	pre, err := st.InsertCallback(t.Context(), row("e-0", 0))
	require.NoError(t, err)

	const events, copies = 60, 5
	type answer struct {
		event string
		res   store.InsertResult
	}
	answers := make(chan answer, events*copies)
	var wg sync.WaitGroup
	for c := range copies {
		for e := range events {
			wg.Go(func() {
				ev := fmt.Sprintf("e-%d", e)
				res, err := b.InsertCallback(t.Context(), row(ev, c*1000+e))
				require.NoError(t, err)
				answers <- answer{ev, res}
			})
		}
	}
	wg.Wait()
	close(answers)

	ids := map[string]int64{}
	fresh := map[string]int{}
	for a := range answers {
		if id, ok := ids[a.event]; ok {
			require.Equal(t, id, a.res.ID, "every answer for %s names the same row", a.event)
		}
		ids[a.event] = a.res.ID
		if !a.res.Duplicate {
			fresh[a.event]++
		}
	}
	require.Len(t, ids, events)
	require.Equal(t, pre.ID, ids["e-0"])
	require.Zero(t, fresh["e-0"], "stored before: every answer is a duplicate")
	for e := 1; e < events; e++ {
		require.Equal(t, 1, fresh[fmt.Sprintf("e-%d", e)], "exactly one duplicate:false per new event")
	}
	var n int64
	require.NoError(t, st.DB.Model(&callback.Log{}).Count(&n).Error)
	require.EqualValues(t, events, n)
}

func TestBatcherBadRowDoesNotFailItsBatchMates(t *testing.T) {
	t.Parallel()
	for _, mode := range idModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testBatcherBadRowDoesNotFailItsBatchMates(t, mode.set)
		})
	}
}

func testBatcherBadRowDoesNotFailItsBatchMates(t *testing.T, mode func(*store.Batcher)) {
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	b := store.NewBatcher(st.Store, 1, 64, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	defer b.Close()
	mode(b)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() {
			r := row(fmt.Sprintf("ok-%d", i), i)
			if i == 7 {
				r.Kind = string(make([]byte, 300)) // longer than the column: refused
			}
			_, errs[i] = b.InsertCallback(t.Context(), r)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i == 7 {
			require.Error(t, err)
		} else {
			require.NoError(t, err, "row %d", i)
		}
	}
}

func row(event string, n int) *callback.Log {
	return &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K", Payload: []byte(`{}`),
		TraceID: fmt.Sprintf("%032x", n+1), ReceivedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// TestBatcherStormOfDuplicatesAcrossTwoGateways: two gateways' batchers
// take 20,000 events, each sent 5 times, in shuffled order from 64
// concurrent clients each. Every event is stored exactly once, every
// request is answered (no 503), and exactly one answer per event says
// duplicate:false, all naming the same row.
func TestBatcherStormOfDuplicatesAcrossTwoGateways(t *testing.T) {
	t.Parallel()
	for _, mode := range idModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testBatcherStormOfDuplicatesAcrossTwoGateways(t, mode.set)
		})
	}
}

func testBatcherStormOfDuplicatesAcrossTwoGateways(t *testing.T, mode func(*store.Batcher)) {
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	batchers := []*store.Batcher{store.NewBatcher(st.Store, 2, 256, quiet, nil), store.NewBatcher(testenv.Store(t, cfg).Store, 2, 256, quiet, nil)}
	defer batchers[0].Close()
	defer batchers[1].Close()
	mode(batchers[0])
	mode(batchers[1])

	const events, copies, clients = 20000, 5, 64
	sends := make([]int, 0, events*copies)
	for e := range events {
		for range copies {
			sends = append(sends, e)
		}
	}
	rand.Shuffle(len(sends), func(i, j int) { sends[i], sends[j] = sends[j], sends[i] })

	ids := make([][]int64, events)
	fresh := make([]int, events)
	var mu sync.Mutex
	var next atomic.Int64
	var failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for c := range 2 * clients {
		b := batchers[c%2]
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(sends) {
					return
				}
				e := sends[i]
				r := row(fmt.Sprintf("storm-%d", e), i)
				r.BusinessKey = fmt.Sprintf("K-%d", e%500)
				res, err := b.InsertCallback(t.Context(), r)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				mu.Lock()
				ids[e] = append(ids[e], res.ID)
				if !res.Duplicate {
					fresh[e]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Zero(t, failures.Load(), "requests answered with an error (a 503): first %v", firstErr.Load())
	for e := range events {
		require.Len(t, ids[e], copies, "event %d answered", e)
		for _, id := range ids[e] {
			require.Equal(t, ids[e][0], id, "every answer for event %d names one row", e)
		}
		require.Equal(t, 1, fresh[e], "exactly one duplicate:false for event %d", e)
	}
	var n int64
	require.NoError(t, st.DB.Model(&callback.Log{}).Count(&n).Error)
	require.EqualValues(t, events, n, "one row per event, none missing")
}
