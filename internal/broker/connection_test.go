package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/testenv"
)

// TestConnectionMovesToTheNextNode: a connection given a cluster's nodes
// skips one that is down, and when the node it is on dies it redials the
// next, on its own. Two proxies to the local broker stand in for two
// nodes, a closed port for a dead one.
func TestConnectionMovesToTheNextNode(t *testing.T) {
	t.Parallel()
	a := testenv.NewProxy(t, strings.TrimSuffix(strings.TrimPrefix(testenv.AMQPURL(), "amqp://guest:guest@"), "/"))
	b := testenv.NewProxy(t, strings.TrimSuffix(strings.TrimPrefix(testenv.AMQPURL(), "amqp://guest:guest@"), "/"))
	url := func(addr string) string { return "amqp://guest:guest@" + addr + "/" }
	nodes := []string{url("127.0.0.1:1"), url(a.Addr()), url(b.Addr())} // nothing listens on port 1
	conn := broker.NewConnection(broker.ConnectionConfig{URLs: nodes, Name: "connection-test",
		ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}, testenv.Logger(t, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); conn.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	_, err := conn.Wait(wctx)
	require.NoError(t, err)
	first := conn.Node()
	require.Contains(t, []string{broker.NodeName(nodes[1]), broker.NodeName(nodes[2])}, first, "a live node")

	// The node it is on dies: it moves to the other live one.
	dead, other := a, nodes[2]
	if first == broker.NodeName(nodes[2]) {
		dead, other = b, nodes[1]
	}
	dead.Down()
	require.Eventually(t, func() bool { return conn.Node() == broker.NodeName(other) }, 10*time.Second, 20*time.Millisecond,
		"reconnected to the other node")
	c, err := conn.Current()
	require.NoError(t, err)
	ch, err := c.Channel()
	require.NoError(t, err, "the new connection works")
	require.NoError(t, ch.Close())
}

func TestNodeNameHidesCredentials(t *testing.T) {
	require.Equal(t, "mq-1.internal:5671/prod", broker.NodeName("amqps://callgate:s3cret@mq-1.internal/prod"))
	require.Equal(t, "127.0.0.1:5672/", broker.NodeName("amqp://guest:guest@127.0.0.1:5672/"))
	require.NotContains(t, broker.NodeName("amqp://u:p@@x"), "p@")
}
