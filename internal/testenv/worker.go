package testenv

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/worker"
)

// Worker is a worker running in-process.
type Worker struct {
	stop context.CancelFunc
	done chan error
}

// StartWorker runs the whole worker (consumers, relay, compensation) from
// cfg until the test ends. opts may swap the handlers or set test hooks.
func StartWorker(t testing.TB, cfg *config.Config, opts worker.Options) *Worker {
	t.Helper()
	return StartWorkerLogging(t, cfg, opts, Logger(t, cfg))
}

// StartWorkerLogging is StartWorker logging to log.
func StartWorkerLogging(t testing.TB, cfg *config.Config, opts worker.Options, log *slog.Logger) *Worker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Worker{stop: cancel, done: make(chan error, 1)}
	go func() {
		w.done <- worker.Run(ctx, cfg.WorkerSettings(), kinds.Registry(cfg.WorkerSettings()), log, opts)
	}()
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// Stop shuts the worker down gracefully and returns Run's error.
func (w *Worker) Stop() error {
	w.stop()
	select {
	case err, ok := <-w.done:
		if ok {
			close(w.done)
		}
		return err
	case <-time.After(60 * time.Second):
		return context.DeadlineExceeded
	}
}

// Downstream binds a test queue to <prefix>.downstream for every routing
// key, as a subscribing team would, and returns it.
func Downstream(t testing.TB, cfg *config.Config) *Queue {
	t.Helper()
	name := cfg.AMQP.Prefix + ".downstream.test"
	q := OpenQueue(t, name)
	ch := q.Channel()
	topo := broker.NewTopology(cfg.AMQP, nil)
	require.NoError(t, ch.ExchangeDeclare(topo.DownstreamExchange(), amqp.ExchangeTopic, true, false, false, false, topo.DownstreamArgs()))
	// A quorum queue on a cluster: a subscriber's queue survives the loss
	// of a node as callgate's own do. A busy cluster can refuse a new
	// quorum queue for a moment (cluster_not_formed, the channel closed):
	// declare again on a new channel.
	var err error
	for try := 0; try < 20; try++ {
		if _, err = q.Channel().QueueDeclare(name, true, false, false, false, topo.QueueArgs()); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	require.NoError(t, err)
	require.NoError(t, q.Channel().QueueBind(name, "#", cfg.AMQP.Prefix+".downstream", false, nil))
	return q
}

// CreateOrders inserts n UNPAID orders ORD-<prefix>-<i> of amount 1000+i
// for user 100+i and returns their codes.
func CreateOrders(t testing.TB, cfg *config.Config, prefix string, n int) []string {
	t.Helper()
	st := Store(t, cfg)
	codes := make([]string, n)
	const chunk = 500
	for start := 0; start < n; start += chunk {
		end := min(start+chunk, n)
		q := "INSERT INTO orders (order_code, user_id, amount) VALUES "
		args := []any{}
		for i := start; i < end; i++ {
			codes[i] = fmt.Sprintf("ORD-%s-%d", prefix, i)
			if i > start {
				q += ","
			}
			q += "(?, ?, ?)"
			args = append(args, codes[i], 100+i, 1000+i)
		}
		_, err := st.SQL.Exec(q, args...)
		require.NoError(t, err)
	}
	return codes
}

// Publish puts a raw announcement on a kind's queue, as the gateway would,
// once the queue exists: straight to the queue (the default exchange), so
// that a worker just started, which may have declared the queue but not
// bound it yet, loses nothing.
func Publish(t testing.TB, cfg *config.Config, kind string, body string) {
	t.Helper()
	q := OpenQueue(t, cfg.AMQP.Prefix+"."+kind)
	require.Eventually(t, func() bool { return q.Depth() >= 0 }, 10*time.Second, 20*time.Millisecond,
		"queue %s was never declared", q.name)
	err := q.Channel().Publish("", q.name, false, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(body),
	})
	require.NoError(t, err)
}

// EachBatchSize runs test with the worker processing one callback per
// transaction (batchSize 1: set worker.batch_size to it) and with the
// shipped batch size (batchSize 0: leave the setting alone): the worker's
// guarantees hold in both settings.
func EachBatchSize(t *testing.T, test func(t *testing.T, batchSize int)) {
	t.Helper()
	eachBatchSize(t, []int{1, 0}, test)
}

// FaultBatchSizesEnv names the batch sizes the fault suite and the HA
// scenarios run at: "default" (what make test runs), or "1,default".
const FaultBatchSizesEnv = "CALLGATE_FAULT_BATCH_SIZES"

// EachFaultBatchSize is EachBatchSize for the fault suite and the HA
// scenarios, which run real processes for a minute each: by default only
// at the shipped batch size, whose fallback runs a failed batch's
// callbacks one per transaction, the batch_size=1 path, so an outage
// meets both; CALLGATE_FAULT_BATCH_SIZES=1,default adds the runs with
// batch_size 1 throughout (they took 4 of the fault suite's 6 minutes).
func EachFaultBatchSize(t *testing.T, test func(t *testing.T, batchSize int)) {
	t.Helper()
	var sizes []int
	for _, f := range strings.Split(cmp.Or(os.Getenv(FaultBatchSizesEnv), "default"), ",") {
		switch strings.TrimSpace(f) {
		case "1":
			sizes = append(sizes, 1)
		case "default":
			sizes = append(sizes, 0)
		default:
			t.Fatalf("%s=%q: want 1, default or 1,default", FaultBatchSizesEnv, os.Getenv(FaultBatchSizesEnv))
		}
	}
	eachBatchSize(t, sizes, test)
}

func eachBatchSize(t *testing.T, sizes []int, test func(t *testing.T, batchSize int)) {
	t.Helper()
	for _, bs := range sizes {
		name := "batch_size=1"
		if bs == 0 {
			name = "batch_size=default"
		}
		t.Run(name, func(t *testing.T) { test(t, bs) })
	}
}
