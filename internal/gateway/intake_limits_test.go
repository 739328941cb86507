package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/gateway"
	"callgate/internal/source"
	"callgate/internal/testenv"
)

// paymentsByFields makes paydemo take its event id from the body's
// paymentNo (as a platform without a webhook-id would), so a test can
// choose event ids that headers could not carry.
func paymentsByFields(c *config.Config) {
	for i := range c.Sources {
		if c.Sources[i].Name == "paydemo" {
			c.Sources[i].EventID = source.EventID{Fields: []string{"paymentNo"}, Separator: ":", IgnoreScheme: true}
		}
	}
}

// TestIntakeIDsDifferingOnlyByTrailingSpaces: 'PAY-1' and 'PAY-1 ' are two
// events and 'ORD-S' and 'ORD-S ' two keys, byte for byte, in both intake
// modes: two rows, two duplicate:false answers, and a re-send of either is
// a duplicate of itself only.
func TestIntakeIDsDifferingOnlyByTrailingSpaces(t *testing.T) {
	bothModes(t, testIntakeIDsDifferingOnlyByTrailingSpaces)
}

func testIntakeIDsDifferingOnlyByTrailingSpaces(t *testing.T, mode func(*config.Config)) {
	b := setup(t, mode, paymentsByFields)
	send := func(order, payment, msgID string) testenv.Answer {
		body := testenv.PaymentBody(order, payment, 1999)
		a := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, msgID, time.Now(), body))
		require.Equal(t, http.StatusOK, a.Status, string(a.Body))
		return a
	}
	plain := send("ORD-S", "PAY-1", "msg_a")
	spaced := send("ORD-S ", "PAY-1 ", "msg_b")
	require.False(t, plain.Duplicate)
	require.False(t, spaced.Duplicate, "an event id with a trailing space is another event")
	require.NotEqual(t, plain.LogID, spaced.LogID)

	require.Equal(t, "PAY-1", b.row(t, plain.LogID).EventID)
	require.Equal(t, "PAY-1 ", b.row(t, spaced.LogID).EventID)
	require.Equal(t, "ORD-S", b.row(t, plain.LogID).BusinessKey)
	require.Equal(t, "ORD-S ", b.row(t, spaced.LogID).BusinessKey, "the business key is stored byte for byte")
	require.Equal(t, 2, b.count(t))

	again := send("ORD-S ", "PAY-1 ", "msg_c")
	require.True(t, again.Duplicate)
	require.Equal(t, spaced.LogID, again.LogID)
	again = send("ORD-S", "PAY-1", "msg_d")
	require.True(t, again.Duplicate)
	require.Equal(t, plain.LogID, again.LogID)

	var keyed int64
	require.NoError(t, testenv.Store(t, b.cfg).DB.Table("callback_log").Where("business_key = ?", "ORD-S").Count(&keyed).Error)
	require.EqualValues(t, 1, keyed, "a key matches itself only (per-key order and locks use this comparison)")
}

// TestIntakeLargeBodiesInOneBurst: 20 callbacks of 1 MiB at once (more than
// MySQL's max_allowed_packet together) and then a small one are all
// answered 200 and stored: batches are bounded by bytes, and no broken
// connection is handed to a later request.
func TestIntakeLargeBodiesInOneBurst(t *testing.T) {
	t.Parallel()
	// A generous store timeout, and write and read timeouts past it (so a
	// slow store is still answered, not cut off): this test is about what
	// MySQL accepts and about connections, not latency (20 MiB on a busy
	// 2-core machine took more than 15 s beside a second make test).
	b := setup(t, paymentsByFields, func(c *config.Config) {
		c.MySQL.IntakeTimeout = 45 * time.Second
		c.HTTP.WriteTimeout, c.HTTP.ReadTimeout = time.Minute, time.Minute
	})
	const n = 20
	limit := b.cfg.Sources[0].MaxBodyBytes
	bodies := make([][]byte, n)
	for i := range bodies {
		head := fmt.Sprintf(`{"orderCode":"ORD-L-%d","paymentNo":"PAY-L-%d","amount":1,"pad":"`, i, i)
		bodies[i] = []byte(head + strings.Repeat("x", int(limit)-len(head)-2) + `"}`)
		require.EqualValues(t, limit, len(bodies[i]))
	}
	answers := make([]testenv.Answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			answers[i] = testenv.Post(t, b.gw.URL, "paydemo", bodies[i], testenv.PaydemoHeaders(t, b.cfg, fmt.Sprintf("msg_l%d", i), time.Now(), bodies[i]))
		})
	}
	wg.Wait()
	for i, a := range answers {
		require.Equal(t, http.StatusOK, a.Status, "large callback %d: %s", i, a.Body)
		require.Equal(t, bodies[i], b.row(t, a.LogID).Payload, "large callback %d stored byte for byte", i)
	}
	small := testenv.PaymentBody("ORD-L-small", "PAY-L-small", 1)
	a := testenv.Post(t, b.gw.URL, "paydemo", small, testenv.PaydemoHeaders(t, b.cfg, "msg_small", time.Now(), small))
	require.Equal(t, http.StatusOK, a.Status, "the next request after the burst: %s", a.Body)
	require.Equal(t, n+1, b.count(t))
}

// TestGatewayRefusesABodyLimitMySQLCannotStore: a max_body_bytes whose
// rows could exceed MySQL's max_allowed_packet stops the start with an
// error naming the source.
func TestGatewayRefusesABodyLimitMySQLCannotStore(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.Sources[1].MaxBodyBytes = 12 << 20 })
	err := gateway.Run(t.Context(), cfg, testenv.Logger(t, cfg), nil)
	require.ErrorContains(t, err, fmt.Sprintf("sources[1] (%s).max_body_bytes", cfg.Sources[1].Name))
	require.ErrorContains(t, err, "max_allowed_packet")
}

// TestIntakeAnnouncesOneMessagePerBatchAndKind: concurrent callbacks that
// share group-commit batches are announced with one message per batch and
// kind, {"log_ids":[...]} in the batch's (arrival) order: every accepted
// callback is announced exactly once, in fewer messages than callbacks.
func TestIntakeAnnouncesOneMessagePerBatchAndKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 60
	accepted := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := testenv.PaymentBody(fmt.Sprintf("ORD-B-%d", i), fmt.Sprintf("PAY-B-%d", i), 1)
			a := testenv.Post(t, b.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, b.cfg, fmt.Sprintf("msg_b%d", i), time.Now(), body))
			require.Equal(t, http.StatusOK, a.Status, string(a.Body))
			accepted[i] = a.LogID
		})
	}
	wg.Wait()

	announced := map[int64]int{}
	messages := 0
	for len(announced) < n {
		d, ok := b.payments.Get(5 * time.Second)
		require.True(t, ok, "every accepted callback is announced: %d of %d", len(announced), n)
		var body struct {
			LogIDs []int64 `json:"log_ids"`
		}
		require.NoError(t, json.Unmarshal(d.Body, &body), string(d.Body))
		require.NotEmpty(t, body.LogIDs)
		require.True(t, slices.IsSorted(body.LogIDs), "a batch's ids in arrival (id) order: %v", body.LogIDs)
		require.NotEmpty(t, d.Headers["traceparent"], "the first callback's trace")
		for _, id := range body.LogIDs {
			announced[id]++
		}
		messages++
	}
	for _, id := range accepted {
		require.Equal(t, 1, announced[id], "log %d announced once", id)
	}
	require.Len(t, announced, n)
	t.Logf("%d callbacks announced in %d messages", n, messages)
	require.Less(t, messages, n, "batches share an announcement")
}

// TestOneReaderOfABody: a signed body holding the business key twice in
// two cases ({"orderCode":"ORD-X1",...,"OrderCode":"ORD-X2"}: the intake
// read X1, encoding/json X2) or the same key twice is refused with 400 and
// nothing stored, in both intake modes; the same at a nested level.
func TestOneReaderOfABody(t *testing.T) {
	bothModes(t, func(t *testing.T, mode func(*config.Config)) {
		b := setup(t, mode)
		for i, body := range []string{
			`{"orderCode":"ORD-X1","paymentNo":"P-1","amount":1999,"status":"SUCCESS","OrderCode":"ORD-X2"}`,
			`{"orderCode":"ORD-X1","paymentNo":"P-1","amount":1999,"status":"SUCCESS","orderCode":"ORD-X2"}`,
			`{"orderCode":"ORD-X1","paymentNo":"P-1","amount":1999,"status":"SUCCESS","meta":{"a":1,"A":2}}`,
		} {
			a := testenv.Post(t, b.gw.URL, "paydemo", []byte(body), testenv.PaydemoHeaders(t, b.cfg, fmt.Sprintf("msg_%d", i), time.Now(), []byte(body)))
			require.Equal(t, http.StatusBadRequest, a.Status, "%s: %s", body, a.Body)
			require.Contains(t, a.Error, "ambiguous JSON key", body)
		}
		require.Zero(t, b.count(t), "nothing stored")
	})
}
