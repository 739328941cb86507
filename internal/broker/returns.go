package broker

import (
	"context"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ReturnTracker pairs the broker's basic.return of a mandatory message with
// that message's confirm, on one channel. RabbitMQ sends the return before
// the confirm, and amqp091-go hands both to their listeners from the
// channel's one reader goroutine, waiting for an unbuffered listener to take
// each: a single goroutine reading both listeners has therefore recorded a
// message's return by the time it reads the message's confirm. (Waiting on
// the DeferredConfirmation alone would race with the recording.)
type ReturnTracker struct {
	mu       sync.Mutex
	returned map[string]int // message id -> returns not yet taken
	seen     uint64         // delivery tag of the last confirm read
	closed   bool
	changed  chan struct{} // closed and replaced on every change
}

// WatchReturns starts recording ch's returns and confirms (until ch closes).
func WatchReturns(ch *amqp.Channel) *ReturnTracker {
	rt := &ReturnTracker{returned: map[string]int{}, changed: make(chan struct{})}
	// Returns unbuffered (the ordering above depends on it); confirms
	// buffered, so the reader goroutine rarely waits for this one.
	returns := ch.NotifyReturn(make(chan amqp.Return))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	go rt.run(returns, confirms)
	return rt
}

// run records returns and confirms until the channel closes both.
func (rt *ReturnTracker) run(returns <-chan amqp.Return, confirms <-chan amqp.Confirmation) {
	for returns != nil || confirms != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			rt.update(func() { rt.returned[r.MessageId]++ })
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			rt.update(func() { rt.seen = max(rt.seen, c.DeliveryTag) })
		}
	}
	rt.update(func() { rt.closed = true })
}

func (rt *ReturnTracker) update(f func()) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	f()
	close(rt.changed)
	rt.changed = make(chan struct{})
}

// Wait returns once the confirm of tag has been read (every return before
// it recorded) or the channel has closed; false if ctx ends first.
func (rt *ReturnTracker) Wait(ctx context.Context, tag uint64) bool {
	for {
		rt.mu.Lock()
		done, changed := rt.seen >= tag || rt.closed, rt.changed
		rt.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// Take reports whether a return of id is recorded, and consumes it.
func (rt *ReturnTracker) Take(id string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.returned[id] == 0 {
		return false
	}
	if rt.returned[id]--; rt.returned[id] == 0 {
		delete(rt.returned, id)
	}
	return true
}
