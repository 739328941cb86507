package store

// gatherer is the loop shape of group commit, shared by the intake's
// Batcher and the outbox's SentMarker: a writer waits for the first
// request, takes whatever else is already queued (no fixed wait: at low
// load a batch is one request), up to a bound, and flushes them in one
// statement. A request that would break the bound starts the next batch.
type gatherer[T any] struct {
	queue chan T
	stop  <-chan struct{}
	// fits reports whether next may join batch.
	fits  func(batch []T, next T) bool
	carry T
	held  bool
}

// next fills batch (emptied first) with the next requests, waiting for the
// first. It reports false once stop is closed and the queue is drained.
func (g *gatherer[T]) next(batch []T) ([]T, bool) {
	batch = batch[:0]
	if g.held {
		batch = append(batch, g.carry)
		g.held = false
	} else {
		select {
		case first := <-g.queue:
			batch = append(batch, first)
		case <-g.stop:
			// Drain what is already queued, then stop.
			select {
			case first := <-g.queue:
				batch = append(batch, first)
			default:
				return batch, false
			}
		}
	}
	for {
		select {
		case r := <-g.queue:
			if !g.fits(batch, r) {
				g.carry, g.held = r, true
				return batch, true
			}
			batch = append(batch, r)
		default:
			return batch, true
		}
	}
}
