package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
)

// TestUnroutableAnnouncementIsNotLost: an announcement no queue is bound for
// (an operator removed the binding) was confirmed by the broker and dropped,
// and nobody knew. The announcer publishes mandatory: the broker returns it,
// the announcer logs an error, keeps it and publishes it again on new
// channels, and once the binding is back the worker's queue has it.
func TestUnroutableAnnouncementIsNotLost(t *testing.T) {
	t.Parallel()
	b := setupTopology(t, false)
	conn := b.connect(t)
	payment := b.topo.Queue("payment")
	require.NoError(t, b.admin.Channel().QueueUnbind(payment, "payment", b.topo.CallbacksExchange(), nil))

	ann := broker.NewAnnouncer(broker.AnnouncerConfig{Exchange: b.topo.CallbacksExchange(), Buffer: 16, AppID: "announcer-test"},
		conn, b.topo.Log)
	ctx, cancel := context.WithCancel(context.Background())
	go ann.Run(ctx, 0)
	t.Cleanup(func() { cancel(); <-ann.Done() })
	require.True(t, ann.Announce(broker.Announcement{Kind: "payment", LogIDs: []int64{42}}))

	require.Eventually(t, func() bool { return ann.Nacked() >= 2 }, 10*time.Second, 20*time.Millisecond,
		"the returned announcement is published again")
	require.Zero(t, ann.Published(), "a returned announcement is not announced")
	// The refusal is logged once the channel it came on is given up, which
	// can be after the announcement was refused again on it (the confirm
	// goroutine requeues it while the loop still publishes): wait for it.
	var refused []map[string]any
	require.Eventually(t, func() bool {
		refused = nil
		for _, w := range b.logs.warnings(t) {
			if w["level"] == "ERROR" && strings.HasPrefix(w["msg"].(string), "announcer: the broker did not take an announcement") {
				refused = append(refused, w)
			}
		}
		return len(refused) > 0
	}, time.Minute, 20*time.Millisecond, "the gateway says so")
	require.Equal(t, "callback-42", refused[0]["message_id"])
	require.Contains(t, refused[0]["reason"], "returned")

	require.NoError(t, b.admin.Channel().QueueBind(payment, "payment", b.topo.CallbacksExchange(), false, nil))
	q := b.admin
	var body []byte
	require.Eventually(t, func() bool {
		d, ok, err := q.Channel().Get(payment, true)
		if err == nil && ok {
			body = d.Body
		}
		return body != nil
	}, 10*time.Second, 20*time.Millisecond, "announced once the queue is bound again")
	ids, err := broker.ParseAnnouncement(body)
	require.NoError(t, err)
	require.Equal(t, []int64{42}, ids)
	require.Eventually(t, func() bool { return ann.Published() == 1 }, 5*time.Second, 10*time.Millisecond, "counted as announced")
}
