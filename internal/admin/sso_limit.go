package admin

import (
	"net/netip"
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

// Per client address (ClientAddr: behind admin.trusted_proxies, the
// client forwarded), in each gateway process:
//
//   - sign-ins started: ssoStartBurst, then one per ssoStartEvery. A
//     start costs a redirect and an HMAC, and people retry and open tabs,
//     so the bound is loose for a person (or an office behind one NAT);
//     what it stops is one address collecting flow cookies by the hundred
//     to spend them at once.
//   - callbacks let through to the token endpoint's queue: as many. A
//     flow cookie is bound to the address that started it, so within one
//     process this bound meets the first only for flows collected over
//     minutes (a cookie lives SSOFlowMaxAge) or at other gateways of the
//     fleet; it keeps one address to half of ssoExchangeBurst, so that
//     the others' sign-ins never wait behind it. It is above the failure
//     budget (ten): an address whose codes the provider refused starts no
//     more sign-ins, while one started before still finishes.
const (
	ssoStartBurst        = 20
	ssoStartEvery        = 3 * time.Second
	ssoAddrExchangeBurst = ssoExchangeBurst / 2
	ssoAddrExchangeEvery = 3 * time.Second
)

// limitKey is the key of client in the per-address limiters: an IPv4
// address as it is, an IPv6 one by its /64, the block one subscriber
// (one host, often) is given, so that a host cannot take a fresh budget
// with each of its 2^64 addresses. Anything else (a test's name) as it is.
func limitKey(client string) string {
	a, err := netip.ParseAddr(client)
	if err != nil {
		return client
	}
	if a = a.Unmap(); a.Is4() {
		return a.String()
	}
	p, err := a.Prefix(64)
	if err != nil {
		return client
	}
	return p.String()
}

// spend marks flow f's state used and reports whether it was unused: a
// flow cookie carries one callback to the provider, so a captured or
// minted one cannot buy more than one call to its token endpoint.
// isSpent reports whether f was spent already (a cookie sent back again).
func (s *SSO) isSpent(f ssoFlow) bool {
	s.spentMu.Lock()
	defer s.spentMu.Unlock()
	_, used := s.spent[f.State]
	return used
}

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
