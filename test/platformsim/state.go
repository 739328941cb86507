package platformsim

import (
	"net/http"
	"sync"
)

// state is what every simulator keeps: whether it is down, how often each
// order or waybill was asked about, and how many requests it refused for
// their signature.
type state struct {
	mu       sync.Mutex
	asked    map[string]int
	down     bool
	refusals int
}

// Down makes every request fail at the connection (true) or be served.
func (s *state) Down(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Asked is how many signed queries key (an order, a waybill) got.
func (s *state) Asked(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[key]
}

// Refusals counts requests refused for their signature.
func (s *state) Refusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusals
}

// hungUp hangs up on the request when the simulator is down.
func (s *state) hungUp(w http.ResponseWriter) bool {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		hangUp(w)
	}
	return down
}

// refused counts a request refused for its signature.
func (s *state) refused() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusals++
}

// count records that key was asked about; call with s.mu held.
func (s *state) count(key string) {
	if s.asked == nil {
		s.asked = map[string]int{}
	}
	s.asked[key]++
}
