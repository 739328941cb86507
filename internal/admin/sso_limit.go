package admin

import (
	"time"
)

type spentFlow struct {
	state   string
	expires int64
}

// Token endpoint calls: ssoExchangeRate a second, ssoExchangeBurst at
// once; a callback waits at most ssoExchangeWait for its turn.
const (
	ssoExchangeRate  = 20
	ssoExchangeBurst = 40
	ssoExchangeWait  = 5 * time.Second
)

// spend marks flow f's state used and reports whether it was unused: a
// flow cookie carries one callback to the provider, so a captured or
// minted one cannot buy more than one call to its token endpoint.
func (s *SSO) spend(f ssoFlow, now time.Time) bool {
	s.spentMu.Lock()
	defer s.spentMu.Unlock()
	if s.spent == nil {
		s.spent = map[string]int64{}
	}
	// Flows are spent within SSOFlowMaxAge of their start, so the front
	// of spentOrder expires first, give or take that: what is pruned
	// never waits longer than that, and at most ssoExchangeRate flows a
	// second are spent (Complete spends after its turn).
	for len(s.spentOrder) > 0 && now.Unix() > s.spentOrder[0].expires {
		delete(s.spent, s.spentOrder[0].state)
		s.spentOrder = s.spentOrder[1:]
	}
	if _, used := s.spent[f.State]; used {
		return false
	}
	s.spent[f.State] = f.Expires
	s.spentOrder = append(s.spentOrder, spentFlow{f.State, f.Expires})
	return true
}
