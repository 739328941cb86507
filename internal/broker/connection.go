// Package broker owns callgate's RabbitMQ side: one self-healing connection
// per process, the topology (exchanges and queues, re-declared on every
// connect), and the announcer that tells the workers a callback is waiting.
//
// amqp091-go's own recovery gives up after a few tries and reuses channel
// objects across reconnects, which makes a stale delivery tag ack the wrong
// message. This package instead redials forever with backoff and hands out
// fresh channels after each reconnect; a delivery always acks on the channel
// that delivered it, so an ack after a reconnect fails instead of hitting a
// different message. Publishing to downstream systems lives in
// internal/downstream; consuming in the worker.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrNotConnected is returned when the broker is currently unreachable.
var ErrNotConnected = errors.New("broker not connected")

// ConnectionConfig configures a Connection.
type ConnectionConfig struct {
	// URLs are the broker's nodes (one, or a cluster's). Dials take them
	// in turn from a random start, so a fleet spreads over a cluster, and
	// after a connection dies the next node is dialled first.
	URLs []string
	// Name shows in RabbitMQ's management UI (connection_name).
	Name string
	// ReconnectMin and ReconnectMax bound the redial backoff (x1.5 per try).
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// Setup runs after every (re)connect, to declare the topology on
	// channels of its own. A failure closes the connection and retries.
	Setup func(conn *amqp.Connection) error
	// OnReconnect is called after every successful connect but the first.
	OnReconnect func()
	// Setting names where URLs came from in the config (amqp.url or
	// amqp.urls), for a RefusedError. Default "amqp.url".
	Setting string
}

// Connection keeps one AMQP connection alive, redialing with backoff
// forever until its Run context ends.
type Connection struct {
	cfg        ConnectionConfig
	log        *slog.Logger
	mu         sync.Mutex
	conn       *amqp.Connection
	ready      chan struct{} // closed while conn is usable
	connects   atomic.Int64
	lastErrMsg atomic.Value  // string
	next       int           // index into cfg.URLs of the node to dial next (Run's goroutine only)
	node       atomic.Value  // string: NodeName of the node connected to, "" when down
	firstRound chan struct{} // closed when the first dial round has ended (connected or not)
	connected  chan struct{} // closed at the first connect
	failed     chan struct{} // closed when Run gave up on a RefusedError
	refused    *RefusedError // set before failed is closed
}

// NewConnection returns a Connection; call Run to connect.
func NewConnection(cfg ConnectionConfig, log *slog.Logger) *Connection {
	if cfg.ReconnectMin <= 0 {
		cfg.ReconnectMin = ReconnectMinDefault
	}
	if cfg.ReconnectMax < cfg.ReconnectMin {
		cfg.ReconnectMax = max(ReconnectMaxDefault, cfg.ReconnectMin)
	}
	if len(cfg.URLs) == 0 {
		cfg.URLs = []string{URLDefault}
	}
	if cfg.Setting == "" {
		cfg.Setting = "amqp.url"
	}
	c := &Connection{cfg: cfg, log: log, ready: make(chan struct{}), firstRound: make(chan struct{}), connected: make(chan struct{}), failed: make(chan struct{})}
	if len(cfg.URLs) > 1 {
		c.next = rand.IntN(len(cfg.URLs))
	}
	c.lastErrMsg.Store("not connected yet")
	c.node.Store("")
	return c
}

// Node names the node connected to (host:port/vhost), or "" while down.
func (c *Connection) Node() string { return c.node.Load().(string) }

// Run dials and keeps the connection up until ctx ends, then closes it.
// Until it has connected once, a broker that refuses the login or the
// vhost (RefusedError) ends it: that lasts until the config changes, so
// the process stops (Failed) instead of retrying for ever. Once connected,
// every failure is retried.
func (c *Connection) Run(ctx context.Context) {
	delay := c.cfg.ReconnectMin
	first := true
	for {
		conn, node, refused, err := c.dialRound(ctx)
		fatal := err != nil && refused != nil && c.connects.Load() == 0
		if fatal {
			c.lastErrMsg.Store(refused.Error())
			c.refused = refused
			close(c.failed)
		}
		if first {
			first = false
			close(c.firstRound)
		}
		if fatal {
			return
		}
		if err != nil {
			c.lastErrMsg.Store(err.Error())
			c.log.Warn("broker: connect failed, retrying", "error", err, "retry_in", delay.String())
			if !sleep(ctx, jitter(delay)) {
				return
			}
			delay = min(time.Duration(float64(delay)*1.5), c.cfg.ReconnectMax)
			continue
		}
		delay = c.cfg.ReconnectMin
		closed := conn.NotifyClose(make(chan *amqp.Error, 1))
		n := c.connects.Add(1)
		c.mu.Lock()
		c.conn = conn
		c.node.Store(node)
		close(c.ready)
		c.mu.Unlock()
		if n > 1 {
			c.log.Info("broker: reconnected", "connects", n, "node", node)
			if c.cfg.OnReconnect != nil {
				c.cfg.OnReconnect()
			}
		} else {
			c.log.Info("broker: connected", "node", node)
			close(c.connected)
		}

		select {
		case <-ctx.Done():
			c.down("shutting down")
			_ = conn.Close()
			return
		case amqpErr := <-closed:
			reason := "connection closed"
			if amqpErr != nil {
				reason = amqpErr.Error()
			}
			c.down(reason)
			c.log.Warn("broker: connection lost, reconnecting", "reason", reason, "node", node)
		}
	}
}

// dialRound tries every node once, starting with the next in turn, and
// returns the first that connects (and takes the topology). The node after
// it is the next in turn: a connection that dies is redialled on another
// node first.
//
// refused is the first node's refusal of the login, the vhost or the
// topology's permissions, when a node answered so.
func (c *Connection) dialRound(ctx context.Context) (conn *amqp.Connection, node string, refused *RefusedError, err error) {
	var errs []error
	for range c.cfg.URLs {
		url := c.cfg.URLs[c.next%len(c.cfg.URLs)]
		c.next = (c.next + 1) % len(c.cfg.URLs)
		node := NodeName(url)
		conn, err := c.dial(url)
		if err == nil {
			return conn, node, nil, nil
		}
		if r := asRefused(err, c.cfg.Setting, url); r != nil && refused == nil {
			refused = r
		}
		errs = append(errs, fmt.Errorf("%s: %w", node, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, "", refused, errors.Unwrap(errs[0])
	}
	return nil, "", refused, errors.Join(errs...)
}

func (c *Connection) dial(url string) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(c.cfg.Name)
	conn, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: props,
		Dial:       amqp.DefaultDial(5 * time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("error dialing broker: %w", err)
	}
	if c.cfg.Setup != nil {
		if err := c.cfg.Setup(conn); err != nil {
			_ = conn.Close()
			return nil, &declareError{fmt.Errorf("error declaring topology: %w", err)}
		}
	}
	return conn, nil
}

func (c *Connection) down(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErrMsg.Store(reason)
	if c.conn != nil {
		c.conn = nil
		c.ready = make(chan struct{})
	}
	c.node.Store("")
}

// FirstRound is closed when the first round of dials has ended, whether
// it connected or not.
func (c *Connection) FirstRound() <-chan struct{} { return c.firstRound }

// Connected is closed once the first connection is up (and stays closed
// while later ones come and go).
func (c *Connection) Connected() <-chan struct{} { return c.connected }

// Failed is closed when Run gave up because the broker refused the login,
// the vhost or the topology before any connect; Refused then says why.
func (c *Connection) Failed() <-chan struct{} { return c.failed }

// Refused is what ended Run (nil while Failed is open).
func (c *Connection) Refused() *RefusedError {
	select {
	case <-c.failed:
		return c.refused
	default:
		return nil
	}
}

// Current returns the live connection, or ErrNotConnected.
func (c *Connection) Current() (*amqp.Connection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.conn.IsClosed() {
		return nil, fmt.Errorf("%w: %s", ErrNotConnected, c.lastErrMsg.Load())
	}
	return c.conn, nil
}

// Wait blocks until a connection is up or ctx ends.
func (c *Connection) Wait(ctx context.Context) (*amqp.Connection, error) {
	for {
		c.mu.Lock()
		conn, ready := c.conn, c.ready
		c.mu.Unlock()
		if conn != nil && !conn.IsClosed() {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ready:
		case <-time.After(time.Second):
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jitter spreads d by +-20% so a fleet does not redial in lockstep.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
