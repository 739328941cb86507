package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/metrics"
	"callgate/internal/payment"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// storeCallbacks stores n payment callbacks for n new orders (each its own
// key) without announcing them, and returns their ids.
func storeCallbacks(t *testing.T, cfg *config.Config, st *testenv.TestStore, tag string, n int) []int64 {
	t.Helper()
	orders := testenv.CreateOrders(t, cfg, tag, n)
	ids := make([]int64, n)
	for i, order := range orders {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: fmt.Sprintf("%s-%d", tag, i),
			BusinessKey: order, Payload: testenv.PaymentBody(order, fmt.Sprintf("PAY-%s-%d", tag, i), int64(1000+i)),
			TraceID: fmt.Sprintf("%032x", i+1), ReceivedAt: time.Now()})
		require.NoError(t, err)
		ids[i] = res.ID
	}
	return ids
}

func announceIDs(t *testing.T, cfg *config.Config, ids []int64) {
	t.Helper()
	body, err := json.Marshal(map[string][]int64{"log_ids": ids})
	require.NoError(t, err)
	testenv.Publish(t, cfg, "payment", string(body))
}

// TestBatchProcessesAnnouncedCallbacksTogether: one announcement of 20
// callbacks (as the gateway sends for a group-commit batch) is processed
// as one batch: all SUCCESS with one attempt each, every notification
// published, no fallback.
func TestBatchProcessesAnnouncedCallbacksTogether(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	down := testenv.Downstream(t, cfg)
	m := metrics.New("worker")
	ids := storeCallbacks(t, cfg, st, "batch", 20)
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m})
	announceIDs(t, cfg, ids)

	for _, id := range ids {
		row := st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts)
		require.Len(t, attemptsOf(t, st, id), 1)
	}
	var paid int64
	require.NoError(t, st.DB.Model(&payment.Order{}).Where("payment_status = ?", payment.OrderPaid).Count(&paid).Error)
	require.EqualValues(t, 20, paid)
	require.Len(t, down.Drain(2*time.Second), 40, "two notifications per callback")
	require.Zero(t, testutil.CollectAndCount(m.BatchFallbacks), "no batch fell back")
	require.EqualValues(t, 1, testutil.CollectAndCount(m.BatchSizes), "the batch size was observed")
}

// TestBatchWithAPoisonCallback: one callback of a batch fails (its handler
// refuses it for good). The others end SUCCESS with exactly one attempt
// each; the poison one FAILED with one attempt; the batch fell back to one
// transaction per callback once.
func TestBatchWithAPoisonCallback(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	m := metrics.New("worker")
	ids := storeCallbacks(t, cfg, st, "poison", 10)
	poison := ids[4]
	var runs atomic.Int64
	reg := registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		runs.Add(1)
		if cb.ID == poison {
			return callback.Permanentf("poison: this payload can never be processed")
		}
		return payment.Handler{}.Handle(ctx, tx, cb, out)
	})
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m, Registry: reg})
	announceIDs(t, cfg, ids)

	row := st.WaitStatus(t, poison, callback.StatusFailed)
	require.Equal(t, 1, row.Attempts)
	require.Contains(t, *row.LastError, "poison")
	for _, id := range ids {
		if id == poison {
			continue
		}
		row := st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts, "callback %d: another's failure used none of its attempts", id)
		att := attemptsOf(t, st, id)
		require.Len(t, att, 1)
		require.Equal(t, callback.OutcomeSuccess, att[0].Outcome)
	}
	require.InDelta(t, 1, testutil.ToFloat64(m.BatchFallbacks.WithLabelValues("handler")), 0)
}

// TestOldSingleIDAnnouncementIsProcessed: a message in the format of
// earlier versions ({"log_id":N}), queued before an upgrade, is processed.
func TestOldSingleIDAnnouncementIsProcessed(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	ids := storeCallbacks(t, cfg, st, "old", 2)
	testenv.StartWorker(t, cfg, worker.Options{})
	testenv.Publish(t, cfg, "payment", fmt.Sprintf(`{"log_id":%d}`, ids[0]))
	announceIDs(t, cfg, ids[1:])
	st.WaitStatus(t, ids[0], callback.StatusSuccess)
	st.WaitStatus(t, ids[1], callback.StatusSuccess)
}
