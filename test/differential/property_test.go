//go:build !race

// The race detector finds nothing in this one-goroutine computation and
// makes it six times slower: make test runs it without (PROPERTY_TEST in
// the Makefile), after the race-detector run.

package differential_test

// Property tests of a payment's life (docs/guarantees.md, "A payment's
// life: facts, the fold and the difference"): the platforms send an
// order's events in any order and more than once, so every arrival order
// of the same events must end with the same order row and the same net
// downstream effect, that net effect must be what the final state says,
// and a repeat must change nothing. Each step of each order is also told
// to the independent model (refmodel_test.go), which must give the same
// notifications and the same row.
//
// The code is driven through payment.Record, the one function a batch
// and a single callback both call (FactOf, then the fold without and
// with the fact, then the difference), without a database: thousands of
// orders a second. `make test` runs FuzzMoneyInAnyOrder with a fixed
// seed (without the race detector), `make fuzz` with random ones; CALLGATE_PROPERTY_SEED=<seed>
// replays one.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
)

// propertySeed is the seed `make test` runs; propertySets how many fact
// sets each seed makes.
const (
	propertySeed = 20261205
	propertySets = 400
)

// FuzzMoneyInAnyOrder runs propertySets generated fact sets of a seed in
// every arrival order (all of them up to 5 events, 40 random ones above).
func FuzzMoneyInAnyOrder(f *testing.F) {
	f.Add(int64(propertySeed))
	// Seeds that once found a disagreement with the model (the rules
	// behind them rarely meet in one seed's sets): kept in make test.
	for _, seed := range []int64{1, 2, 3, 6, 7, 8} {
		f.Add(seed)
	}
	if s := os.Getenv("CALLGATE_PROPERTY_SEED"); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f.Fatalf("CALLGATE_PROPERTY_SEED=%q is not a number", s)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewPCG(uint64(seed), 37))
		orders := 0
		for i := range propertySets {
			set := genFactSet(r)
			checkEveryOrder(t, r, fmt.Sprintf("seed %d set %d", seed, i), set)
			orders++
		}
		t.Logf("seed %d: %d fact sets, each in many orders, agree", seed, orders)
	})
}

// propOrder is the order every set is about.
var propOrder = payment.Order{OrderCode: "ORD-P", UserID: 7, Amount: 1000, Currency: "CNY"}

// propBase is the platform's clock at the start of a set.
var propBase = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// genFactSet makes the events of one order: payments (the paying one,
// failed attempts of the same number before or after it, a second
// payment, one of another amount or currency), refunds one by one
// (succeeded, failed, reversed, failed then succeeded) and as running
// totals (with and without a refund number), dispute stages (opened,
// lost, won, lost again), a close, and repeats of any of them.
func genFactSet(r *rand.Rand) []callback.PaymentEvent {
	at := func(minutes int) *time.Time {
		t := propBase.Add(time.Duration(minutes) * time.Minute)
		return &t
	}
	// Most events get a time of their own; some share one (ties), a few
	// have none (taken when received).
	when := func() *time.Time {
		switch r.IntN(12) {
		case 0:
			return nil
		case 1, 2:
			return at(30)
		}
		return at(r.IntN(120))
	}
	n := 2 + r.IntN(5)
	var evs []callback.PaymentEvent
	// A payment or refund reports a status once (its identity): what is
	// generated again for it is the platform's resend of the same event.
	once := map[string]callback.PaymentEvent{}
	add := func(identity string, ev callback.PaymentEvent) {
		if prev, ok := once[identity]; ok {
			ev = prev
		}
		once[identity] = ev
		evs = append(evs, ev)
	}
	pay := func(no string, amount int64, currency, status string) callback.PaymentEvent {
		return callback.PaymentEvent{Type: callback.TypePayment, OrderCode: propOrder.OrderCode, PaymentNo: no, Amount: amount, Currency: currency,
			Status: status, OccurredAt: when()}
	}
	refundNos := []string{"re_1", "re_2", "re_3"}
	for len(evs) < n {
		switch k := r.IntN(20); {
		case k < 4:
			add("P1 ok", pay("P1", 1000, "CNY", callback.PaymentSuccess))
		case k < 6:
			add("P1 failed", pay("P1", 1000, "CNY", callback.PaymentFailed))
		case k < 7:
			switch r.IntN(3) {
			case 0:
				add("P2", pay("P2", 1000, "CNY", callback.PaymentSuccess))
			case 1:
				add("P3", pay("P3", 900, "CNY", callback.PaymentSuccess))
			default:
				add("P4", pay("P4", 1000, "USD", callback.PaymentSuccess))
			}
		case k < 11:
			no := refundNos[r.IntN(len(refundNos))]
			status := []string{callback.RefundSuccess, callback.RefundSuccess, callback.RefundFailed, callback.RefundReversed}[r.IntN(4)]
			amount := []int64{200, 300, 500, 1000}[r.IntN(4)]
			payNo := []string{"P1", "P1", "", "P2"}[r.IntN(4)]
			currency := "CNY"
			if r.IntN(8) == 0 {
				currency = "USD" // another currency than the order's: it never counts
			}
			ev := callback.PaymentEvent{Type: callback.TypeRefund, OrderCode: propOrder.OrderCode, PaymentNo: payNo, RefundNo: no,
				Amount: amount, Currency: currency, Status: status, OccurredAt: when()}
			if r.IntN(2) == 0 {
				ev.InitiatedAt = at(r.IntN(60))
			}
			if status != callback.RefundSuccess && r.IntN(3) == 0 {
				ev.Reason = "declined"
			}
			add(no+" "+status, ev)
		case k < 13:
			total := []int64{200, 300, 500, 800, 1000}[r.IntN(5)]
			ev := callback.PaymentEvent{Type: callback.TypeRefund, OrderCode: propOrder.OrderCode, PaymentNo: "P1", RefundedTotal: &total,
				Currency: "CNY", Status: callback.RefundSuccess, OccurredAt: when()}
			if r.IntN(2) == 0 {
				ev.RefundNo = refundNos[r.IntN(len(refundNos))]
			}
			evs = append(evs, ev)
		case k < 17:
			status := []string{callback.DisputeOpen, callback.DisputeLost, callback.DisputeLost, callback.DisputeWon}[r.IntN(4)]
			evs = append(evs, callback.PaymentEvent{Type: callback.TypeDispute, OrderCode: propOrder.OrderCode, PaymentNo: "P1",
				DisputeID: []string{"dp_1", "dp_2"}[r.IntN(2)], Amount: []int64{300, 1000}[r.IntN(2)], Currency: "CNY", Status: status,
				OccurredAt: when()})
		case k < 18:
			evs = append(evs, callback.PaymentEvent{Type: callback.TypeClose, OrderCode: propOrder.OrderCode, Reason: "closed", OccurredAt: when()})
		default:
			if len(evs) > 0 { // a platform's resend
				evs = append(evs, evs[r.IntN(len(evs))])
			}
		}
	}
	return evs
}

// propRun is one arrival order's outcome.
type propRun struct {
	row   string
	final payment.State
	told  bool
	// net effects, from the notifications
	points, refunded          int64
	ships, cancels, moneyLeft int
}

// checkEveryOrder runs set in every order (all permutations up to 5
// events, else 40 random ones) and checks the properties.
func checkEveryOrder(t *testing.T, r *rand.Rand, name string, set []callback.PaymentEvent) {
	t.Helper()
	var perms [][]int
	if len(set) <= 5 {
		perms = permutations(len(set))
	} else {
		for range 40 {
			perms = append(perms, r.Perm(len(set)))
		}
	}
	// Only facts the platform dates are taken in the same order whatever
	// order they arrive in (undated ones: when they were received).
	dated := true
	for _, ev := range set {
		dated = dated && (ev.OccurredAt != nil || ev.PaidAt != nil)
	}
	var first *propRun
	for _, perm := range perms {
		run := runOrder(t, name, set, perm)
		desc := fmt.Sprintf("%s, arrival order %v of:\n%s", name, perm, describeSet(set))
		// The net effect is what the final state says.
		require.Equal(t, run.final.Points(propOrder.Amount), run.points, "%s\npoints.add less points.deduct", desc)
		require.Equal(t, run.final.Refunded, run.refunded, "%s\norder.refunded less uncounted", desc)
		require.Equal(t, map[bool]int{true: 1, false: 0}[run.final.Shipped], run.ships, "%s\nwarehouse.ship", desc)
		require.LessOrEqual(t, run.cancels, 1, "%s\nwarehouse.cancel at most once", desc)
		if run.final.Cancelled {
			require.Equal(t, 1, run.cancels, "%s\nwarehouse.cancel once for a cancelled order", desc)
		} else if run.cancels == 1 {
			require.Positive(t, run.moneyLeft, "%s\na cancel for an order not cancelled in the end comes with cancelled_with_money_left", desc)
		}
		require.Equal(t, run.cancels == 1, run.told, "%s\nwarehouse_cancelled", desc)
		if first == nil || !dated {
			first = &run
			continue
		}
		// Every order of the same facts ends the same.
		require.Equal(t, first.row, run.row, "%s\nthe order row", desc)
		require.Equal(t, first.points, run.points, "%s\nnet points", desc)
		require.Equal(t, first.refunded, run.refunded, "%s\nnet refunded", desc)
		require.Equal(t, first.ships, run.ships, "%s\nships", desc)
	}
}

// runOrder tells set's events to the code and to the independent model
// in the order perm, requiring the same notifications at every step and
// the same row at the end, and that a repeat of each event then changes
// nothing.
func runOrder(t *testing.T, name string, set []callback.PaymentEvent, perm []int) propRun {
	t.Helper()
	o := propOrder
	rm := newRefModel([]refOrder{{Code: o.OrderCode, User: o.UserID, Amount: o.Amount, Currency: o.Currency}}, nil)
	var facts []payment.Fact
	told := false
	var run propRun
	received := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	step := func(i int, ev callback.PaymentEvent, id int64) []callback.Message {
		cb := &callback.Log{ID: id, Source: "paydemo", Kind: callback.KindPayment, ReceivedAt: received.Add(time.Duration(id) * time.Millisecond)}
		currency := ev.Currency
		if currency == "" {
			currency = o.Currency
		}
		x := payment.FactOf(&ev, o.OrderCode, currency, cb)
		st := payment.Record(&o, facts, x, told)
		if st.Recorded {
			facts = append(facts, x)
			told = st.Told
		}
		want := rm.Apply(refEvent{Source: "paydemo", LogID: id, ReceivedAt: cb.ReceivedAt, Type: ev.Type, OrderCode: ev.OrderCode,
			PaymentNo: ev.PaymentNo, RefundNo: ev.RefundNo, DisputeID: ev.DisputeID, Amount: ev.Amount, RefundedTotal: ev.RefundedTotal,
			Currency: ev.Currency, Status: ev.Status, Reason: ev.Reason, PaidAt: ev.PaidAt, OccurredAt: ev.OccurredAt, InitiatedAt: ev.InitiatedAt})
		got := messagesText(t, st.Messages)
		var wantText []string
		for _, m := range want.Messages {
			wantText = append(wantText, m.RoutingKey+" "+canonicalPayload(t, m.Payload))
		}
		if !slices.Equal(wantText, got) {
			t.Fatalf("%s, arrival order %v, step %d (event %d: %s):\n  model: %q\n  code:  %q\nof:\n%s", name, perm, i, perm[min(i, len(perm)-1)],
				describe(ev), wantText, got, describeSet(set))
		}
		require.Equal(t, want.NoEffect, !st.Recorded, "%s, order %v, step %d: recorded", name, perm, i)
		return st.Messages
	}
	for i, k := range perm {
		for _, m := range step(i, set[k], int64(i+1)) {
			run.count(m)
		}
	}
	run.final = payment.Derive(&o, facts)
	run.told = told
	row := rm.Row(o.OrderCode)
	codeRow := refOrderRow{Status: run.final.Status, PaymentNo: run.final.PaymentNo, PaidAt: run.final.PaidAt, Refunded: run.final.Refunded,
		Chargeback: run.final.Chargeback, DisputeStatus: run.final.DisputeStatus, WarehouseCancelled: told}
	require.Equal(t, row, codeRow, "%s, order %v: the row (model, code)\n%s", name, perm, describeSet(set))
	run.row = fmt.Sprintf("%+v", codeRow)
	run.row = strings.Replace(run.row, fmt.Sprintf("WarehouseCancelled:%t", told), "", 1)
	// A repeat changes nothing.
	for j, ev := range set {
		if msgs := step(len(perm)+j, ev, int64(len(perm)+j+1)); len(msgs) > 0 {
			t.Fatalf("%s, order %v: a repeat of %s published %q", name, perm, describe(ev), messagesText(t, msgs))
		}
	}
	return run
}

// count adds a notification to the net effects.
func (r *propRun) count(m callback.Message) {
	p := m.Payload.(map[string]any)
	amount := func(k string) int64 { return p[k].(int64) }
	switch m.RoutingKey {
	case payment.RoutingPointsAdd:
		r.points += amount("amount")
	case payment.RoutingPointsDeduct:
		r.points -= amount("amount")
	case payment.RoutingOrderRefunded:
		r.refunded += amount("amount")
	case payment.RoutingOrderRefundFail:
		r.refunded -= amount("uncounted")
	case payment.RoutingWarehouseShip:
		r.ships++
	case payment.RoutingWarehouseCancel:
		r.cancels++
	case payment.RoutingPaymentException:
		if p["kind"] == payment.ExceptionCancelledWithMoneyLeft {
			r.moneyLeft++
		}
	}
}

func messagesText(t *testing.T, msgs []callback.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.RoutingKey+" "+canonicalPayload(t, m.Payload))
	}
	return out
}

func canonicalPayload(t *testing.T, p any) string {
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return canonicalJSON(t, b)
}

func describe(ev callback.PaymentEvent) string {
	b, _ := json.Marshal(ev)
	return string(b)
}

func describeSet(set []callback.PaymentEvent) string {
	var lines []string
	for i, ev := range set {
		lines = append(lines, fmt.Sprintf("  %d: %s", i, describe(ev)))
	}
	return strings.Join(lines, "\n")
}

// permutations lists every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}
