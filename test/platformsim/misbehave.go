package platformsim

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Misbehaviour is what a platform's API does wrong, to every request until
// changed (the zero value: nothing, the request is served).
type Misbehaviour struct {
	// RedirectTo answers 307 to this URL (the path asked is appended).
	RedirectTo string
	// Oversize answers 200 with a body of this many bytes.
	Oversize int
	// Status answers this status (429, 503) with an empty JSON body, and
	// RetryAfter as the Retry-After header when set.
	Status     int
	RetryAfter string
	// Delay holds each request this long (or until the caller goes away)
	// before the rest: a slow or hung platform.
	Delay time.Duration
}

// misbehaving is the Misbehaviour every simulator can be given.
type misbehaving struct {
	mbMu   sync.Mutex
	m      Misbehaviour
	served int
}

// Misbehave makes the simulator misbehave as m from now on.
func (s *misbehaving) Misbehave(m Misbehaviour) {
	s.mbMu.Lock()
	defer s.mbMu.Unlock()
	s.m = m
}

// Requests counts the requests that reached the simulator, misbehaved to
// or not.
func (s *misbehaving) Requests() int {
	s.mbMu.Lock()
	defer s.mbMu.Unlock()
	return s.served
}

func (s *misbehaving) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mbMu.Lock()
		m := s.m
		s.served++
		s.mbMu.Unlock()
		if m.Delay > 0 {
			select {
			case <-time.After(m.Delay):
			case <-r.Context().Done():
				return
			}
		}
		switch {
		case m.RedirectTo != "":
			http.Redirect(w, r, strings.TrimRight(m.RedirectTo, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		case m.Oversize > 0:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(m.Oversize))
			_, _ = w.Write([]byte(strings.Repeat(" ", m.Oversize)))
		case m.Status != 0:
			if m.RetryAfter != "" {
				w.Header().Set("Retry-After", m.RetryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(m.Status)
			_, _ = w.Write([]byte(`{}`))
		default:
			h.ServeHTTP(w, r)
		}
	})
}
