package outbox

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"callgate/internal/downstream"
	"callgate/internal/store"
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Interval between passes. Default 1s.
	Interval time.Duration `yaml:"interval"`
	// MinAge leaves younger rows to the fast path: a row is taken only
	// once it has been committed this long, by the database's clock (its
	// created_at is written right before the commit). The fast path
	// publishes right after the commit, so the relay sends a row the fast
	// path is still sending only when that takes longer than MinAge (a
	// broker that stalls its confirms): delivery stays at least once.
	// Default 5s.
	MinAge time.Duration `yaml:"min_age"`
	// BatchSize rows are claimed per transaction. Default 100.
	BatchSize int `yaml:"batch_size"`
}

// Relay defaults.
const (
	RelayIntervalDefault  = time.Second
	RelayMinAgeDefault    = 5 * time.Second
	RelayBatchSizeDefault = 100
)

// Validate reports every problem at once, each naming its field.
func (c RelayConfig) Validate() error {
	if c.Interval < 0 || c.MinAge < 0 || c.BatchSize < 1 {
		return errors.New("interval and min_age must not be negative, batch_size at least 1")
	}
	return nil
}

// WithDefaults fills unset fields.
func (c RelayConfig) WithDefaults() RelayConfig {
	if c.Interval <= 0 {
		c.Interval = RelayIntervalDefault
	}
	if c.MinAge <= 0 {
		c.MinAge = RelayMinAgeDefault
	}
	if c.BatchSize <= 0 {
		c.BatchSize = RelayBatchSizeDefault
	}
	return c
}

// Relay publishes what the fast path left behind: PENDING rows older than
// MinAge, claimed in small batches with FOR UPDATE SKIP LOCKED so that
// several relays (several workers) never take the same row in the same
// pass. A crash between publish and mark leads to a re-send, never a loss.
type Relay struct {
	cfg  RelayConfig
	st   *store.Store
	pub  Publisher
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
	// OnBatch, if set, is called after each batch with the rows sent.
	OnBatch func(sent int)
}

// NewRelay returns a Relay; Start runs it.
func NewRelay(cfg RelayConfig, st *store.Store, pub Publisher, log *slog.Logger) *Relay {
	return &Relay{cfg: cfg.WithDefaults(), st: st, pub: pub, log: log}
}

// Start runs the relay loop in the background and returns at once.
func (r *Relay) Start(ctx context.Context) {
	ctx, r.stop = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := r.RunOnce(ctx); err != nil && !errors.Is(err, context.Canceled) {
				r.log.Warn("relay: pass failed", "error", err)
			}
		}
	}()
}

// Stop ends the loop and waits for it; safe to call twice.
func (r *Relay) Stop() {
	r.once.Do(func() {
		if r.stop != nil {
			r.stop()
			<-r.done
		}
	})
}

// RunOnce drains batches until one comes back short, and returns how many
// rows it sent.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	total := 0
	for ctx.Err() == nil {
		claimed, sent, err := r.batch(ctx)
		total += sent
		if err != nil {
			return total, err
		}
		if r.OnBatch != nil && claimed > 0 {
			r.OnBatch(sent)
		}
		if claimed < r.cfg.BatchSize || sent < claimed {
			return total, nil
		}
		// A little air between batches for the fast path's transactions.
		time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
	}
	return total, ctx.Err()
}

func (r *Relay) batch(ctx context.Context) (claimed, sent int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The rows stay locked while they are published, so another relay
	// skips them.
	err = r.st.InTx(ctx, func(tx *store.Tx) error {
		rows, err := r.st.ClaimOutboxTx(ctx, tx, r.cfg.MinAge, r.cfg.BatchSize)
		if err != nil {
			return err
		}
		claimed = len(rows)
		if claimed == 0 {
			return nil
		}
		msgs := make([]downstream.Message, len(rows))
		for i, row := range rows {
			msgs[i] = Message(row)
		}
		acked, perr := r.pub.Publish(ctx, msgs)
		var ok, failed []Row
		for i, a := range acked {
			if a {
				ok = append(ok, rows[i])
			} else {
				failed = append(failed, rows[i])
			}
		}
		if err := r.st.MarkOutboxSentTx(ctx, tx, ok); err != nil {
			return err
		}
		reason := "not confirmed by the broker"
		if perr != nil {
			reason = perr.Error()
		}
		if err := r.st.RecordOutboxFailureTx(ctx, tx, failed, reason); err != nil {
			return err
		}
		sent = len(ok)
		return nil
	})
	if err == nil && sent > 0 {
		r.log.Debug("relay: published batch", "count", sent)
	}
	return claimed, sent, err
}
