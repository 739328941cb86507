package outbox

import (
	"context"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Marker records outbox rows as SENT for many concurrent callers in shared
// statements: each caller waits until its own rows are marked, but callers
// that arrive while an UPDATE runs share the next one (group commit), which
// saves the database one transaction per processed callback.
type Marker struct {
	db    *gorm.DB
	reqs  chan *markReq
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	limit int
}

type markReq struct {
	ids  []string
	err  error
	done chan struct{}
}

// NewMarker starts a Marker; Close stops it.
func NewMarker(db *gorm.DB) *Marker {
	m := &Marker{db: db, reqs: make(chan *markReq, 256), stop: make(chan struct{}), done: make(chan struct{}), limit: 1000}
	go m.run()
	return m
}

// MarkSent marks the rows with these message ids SENT and returns once
// that is committed.
func (m *Marker) MarkSent(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	r := &markReq{ids: ids, done: make(chan struct{})}
	select {
	case m.reqs <- r:
	case <-m.stop:
		return markSent(ctx, m.db, ids)
	}
	<-r.done
	return r.err
}

// Close marks what is queued and stops.
func (m *Marker) Close() {
	m.once.Do(func() { close(m.stop) })
	<-m.done
}

func (m *Marker) run() {
	defer close(m.done)
	for {
		var first *markReq
		select {
		case first = <-m.reqs:
		case <-m.stop:
			select {
			case first = <-m.reqs:
			default:
				return
			}
		}
		batch := []*markReq{first}
		n := len(first.ids)
	fill:
		for n < m.limit {
			select {
			case r := <-m.reqs:
				batch = append(batch, r)
				n += len(r.ids)
			default:
				break fill
			}
		}
		ids := make([]string, 0, n)
		for _, r := range batch {
			ids = append(ids, r.ids...)
		}
		err := markSent(context.Background(), m.db, ids)
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
	}
}

// markSentTimeout bounds one marking statement.
const markSentTimeout = 10 * time.Second
