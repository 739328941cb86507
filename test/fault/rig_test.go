//go:build fault

package fault

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/testenv"
)

// Settings the fault tests change in the shipped YAML (no environment
// override exists for them), by dotted key.
var faultYAML = map[string]string{
	// A lost announcement is re-announced after 2s instead of 1m.
	"scheduler.compensation.threshold": "2s",
	// The relay publishes what the fast path left after 1s instead of 5s.
	"scheduler.outbox_relay.min_age": "1s",
	// The worker's shutdown grace.
	"worker.shutdown_timeout": "10s",
}

// faultYAMLIfPresent are changed only when the shipped file has the key.
var faultYAMLIfPresent = map[string]string{
	// Several workers (and whatever else runs on this machine) must not
	// fight over the default :9090.
	"worker.metrics_addr": "127.0.0.1:0",
}

// Shutdown timeouts the processes run with (the gateway's is the shipped
// http.shutdown_timeout).
const (
	gatewayShutdownTimeout = 10 * time.Second
	workerShutdownTimeout  = 10 * time.Second
)

// rig is one test's system: a fresh database and AMQP prefix, the gateway
// and worker binaries as child processes on them, the orders the load pays
// and a downstream test queue.
type rig struct {
	t       *testing.T
	cfg     *config.Config // points at the real MySQL (for assertions)
	db      *sql.DB        // direct connection, for assertions
	dsn     string         // what the processes use (may go through a proxy)
	cfgPath string
	url     string
	urls    []string // every gateway's (url is the first's)
	codes   []string
	gw      *proc          // the first gateway
	wk      *proc          // the first worker
	gws     []*proc        // every gateway (rigOpts.Pairs)
	wks     []*proc        // every worker
	mysql   *testenv.Proxy // nil unless rigOpts.MySQLProxy
}

type rigOpts struct {
	Orders int
	// BatchSize is the worker's worker.batch_size (0: the shipped one).
	BatchSize int
	// MySQLProxy puts a Toxiproxy between the processes and MySQL.
	MySQLProxy bool
	// Pairs is how many gateways and workers run (default 1).
	Pairs int
	// Env is added to every process's environment (the HA scenarios'
	// broker nodes and durability).
	Env []string
	// YAML are further settings of the shipped file, by dotted key.
	YAML map[string]any
	// Config edits the test's own config (the one its assertions and its
	// downstream queue use), to match what YAML gives the processes.
	Config func(*config.Config)
}

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	var mutate []func(*config.Config)
	if o.Config != nil {
		mutate = append(mutate, o.Config)
	}
	cfg := testenv.Config(t, mutate...)
	r := &rig{t: t, cfg: cfg, dsn: cfg.MySQL.DSN}
	if o.MySQLProxy {
		mc, err := mysql.ParseDSN(cfg.MySQL.DSN)
		require.NoError(t, err)
		r.mysql = testenv.NewProxy(t, mc.Addr)
		mc.Addr = r.mysql.Addr()
		r.dsn = mc.FormatDSN()
	}
	db, err := sql.Open("mysql", cfg.MySQL.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	r.db = db

	r.cfgPath = writeFaultConfig(t, o.BatchSize, o.YAML)
	if o.Orders > 0 {
		r.codes = testenv.CreateOrders(t, cfg, cfg.AMQP.Prefix, o.Orders)
	}
	// Bound before the worker publishes anything.
	testenv.Downstream(t, cfg)

	if o.Pairs == 0 {
		o.Pairs = 1
	}
	for i := range o.Pairs {
		addr := freeAddr(t)
		url := "http://" + addr
		env := append([]string{
			"CALLGATE_MYSQL_DSN=" + r.dsn,
			"CALLGATE_AMQP_URL=" + cfg.AMQP.URL,
			"CALLGATE_AMQP_PREFIX=" + cfg.AMQP.Prefix,
			"CALLGATE_HTTP_ADDR=" + addr,
			"CALLGATE_DEMO=1", // the suite signs with the demo sources' secrets
		}, o.Env...)
		name := func(what string) string {
			if o.Pairs == 1 {
				return what
			}
			return fmt.Sprintf("%s%d", what, i+1)
		}
		gw := newProc(t, name("gateway"), gatewayBin, env, "-config", r.cfgPath)
		gw.ready = readyzCheck(url, 30*time.Second)
		wk := newProc(t, name("worker"), workerBin, env, "-config", r.cfgPath)
		wk.ready = startedCheck(30 * time.Second)
		r.urls = append(r.urls, url)
		r.gws = append(r.gws, gw)
		r.wks = append(r.wks, wk)
	}
	r.url, r.gw, r.wk = r.urls[0], r.gws[0], r.wks[0]
	return r
}

// writeFaultConfig writes the shipped YAML with faultYAML applied (a YAML
// round trip: ${VAR} references stay as they are, comments go).
func writeFaultConfig(t *testing.T, batchSize int, extra map[string]any) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml"))
	require.NoError(t, err)
	var tree map[string]any
	err = yaml.Unmarshal(raw, &tree)
	require.NoError(t, err)
	set := func(key string, value any, mustExist bool) {
		parts := strings.Split(key, ".")
		m := tree
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			require.True(t, ok, "configs/callgate.yaml has no %q section (for %s)", p, key)
			m = next
		}
		last := parts[len(parts)-1]
		if _, ok := m[last]; !ok && !mustExist {
			return
		}
		m[last] = value
	}
	for k, v := range faultYAML {
		set(k, v, true)
	}
	for k, v := range faultYAMLIfPresent {
		set(k, v, false)
	}
	if batchSize > 0 {
		set("worker.batch_size", batchSize, true)
	}
	for k, v := range extra {
		set(k, v, true)
	}
	out, err := yaml.Marshal(tree)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "callgate.yaml")
	require.NoError(t, os.WriteFile(p, out, 0o600))
	_, err = config.Load(p, kinds.Names())
	require.NoError(t, err, "the fault tests' config does not load")
	return p
}

// startBoth starts the gateways and the workers and waits for them.
func (r *rig) startBoth() {
	r.t.Helper()
	for _, p := range r.gws {
		p.start()
	}
	for _, p := range r.wks {
		p.start()
	}
}

// load starts a load of r's orders (or of codes, if given).
func (r *rig) load(spec loadSpec) *load {
	spec.URL = r.url
	if len(r.urls) > 1 {
		spec.URLs = r.urls
	}
	spec.Secret = testenv.Secret(r.t, r.cfg, "paydemo")
	if spec.Orders == nil {
		spec.Orders = r.codes
	}
	return startLoad(r.t, spec)
}

// count runs a COUNT-like query.
func (r *rig) count(q string, args ...any) int {
	r.t.Helper()
	var n int
	require.NoError(r.t, r.db.QueryRow(q, args...).Scan(&n), q)
	return n
}

// counts polls the figures the drain waits on.
type counts struct {
	rows, pending, success, failed, outboxUnsent int
}

func (r *rig) counts() (counts, error) {
	var c counts
	err := r.db.QueryRow(`SELECT COUNT(*), COALESCE(SUM(status='PENDING'),0), COALESCE(SUM(status='SUCCESS'),0), COALESCE(SUM(status='FAILED'),0) FROM callback_log`).
		Scan(&c.rows, &c.pending, &c.success, &c.failed)
	if err != nil {
		return c, err
	}
	err = r.db.QueryRow(`SELECT COUNT(*) FROM outbox WHERE status <> 'SENT'`).Scan(&c.outboxUnsent)
	return c, err
}

// drained waits up to limit until every callback stored is settled and
// every outbox row SENT, and returns when that happened.
func (r *rig) drained(limit time.Duration) time.Time {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	var c counts
	var err error
	for time.Now().Before(deadline) {
		c, err = r.counts()
		if err == nil && c.pending == 0 && c.outboxUnsent == 0 {
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.FailNow(r.t, "backlog not drained in time",
		"after %s: rows=%d pending=%d success=%d failed=%d outbox_unsent=%d err=%v", limit, c.rows, c.pending, c.success, c.failed, c.outboxUnsent, err)
	return time.Time{}
}

// verdict is what verify measured.
type verdict struct {
	rows, success, paid, attempts, outbox, distinct, deliveries, duplicates int
}

func (v verdict) String() string {
	return fmt.Sprintf("rows=%d success=%d paid=%d success_attempts=%d outbox=%d downstream_distinct=%d deliveries=%d duplicate_deliveries=%d",
		v.rows, v.success, v.paid, v.attempts, v.outbox, v.distinct, v.deliveries, v.duplicates)
}

// verify is the end-of-test check for what loads sent (all of them make
// up the test's callbacks): wait until the backlog is drained, then every
// 200 names a stored row of its order, processed exactly once (the order
// PAID by that payment, one SUCCESS attempt, two outbox rows, all SENT), and
// every notification reached the downstream queue at least once.
func (r *rig) verify(limit time.Duration, loads ...*load) verdict {
	r.t.Helper()
	t := r.t
	var codes []string
	var accepted []int64
	for _, l := range loads {
		l.wait()
		require.Zero(t, l.gaveUp.Load(), "requests never answered 200: first problem: %v", l.firstErr.Load())
		require.Zero(t, l.mismatch.Load(), "answers for one callback named different log ids: %v", l.firstErr.Load())
		require.Zero(t, l.s5xx.Load()+l.s4xx.Load(), "unexpected answers: first: %v", l.firstErr.Load())
		codes = append(codes, l.spec.Orders...)
		accepted = append(accepted, l.accepted()...)
	}
	n := len(codes)
	for i, id := range accepted {
		require.NotZero(t, id, "order %s never got a 200", codes[i])
	}

	r.drained(limit)

	// Every 200 names a row of its order, and that row is SUCCESS.
	type row struct {
		key    string
		status string
	}
	rows := map[int64]row{}
	res, err := r.db.Query(`SELECT id, business_key, status FROM callback_log`)
	require.NoError(t, err)
	for res.Next() {
		var id int64
		var rw row
		require.NoError(t, res.Scan(&id, &rw.key, &rw.status))
		rows[id] = rw
	}
	require.NoError(t, res.Err())
	_ = res.Close() //nolint:sqlclosecheck // closed before the next query reuses res
	for i, id := range accepted {
		rw, ok := rows[id]
		require.True(t, ok, "order %s was answered 200 with log_id %d, but no such row exists", codes[i], id)
		require.Equal(t, codes[i], rw.key, "log_id %d answered for order %s", id, codes[i])
		require.Equal(t, "SUCCESS", rw.status, "log_id %d (order %s)", id, codes[i])
	}
	var v verdict
	v.rows = len(rows)
	require.Equal(t, n, v.rows, "one row per callback (the platform's retries and copies are duplicates)")
	v.success = r.count(`SELECT COUNT(*) FROM callback_log WHERE status = 'SUCCESS'`)
	require.Equal(t, n, v.success)
	require.Equal(t, n, r.count(`SELECT COUNT(DISTINCT business_key) FROM callback_log WHERE status = 'SUCCESS'`), "one SUCCESS callback per order")

	// The business effect, once per order.
	v.paid = r.count(`SELECT COUNT(*) FROM orders WHERE payment_status = 'PAID' AND payment_no = CONCAT('PAY-', order_code) AND paid_at IS NOT NULL`)
	require.Equal(t, n, v.paid, "every order PAID by its payment")
	require.Equal(t, n, r.count(`SELECT COUNT(*) FROM orders`))

	// Processed exactly once: one SUCCESS attempt per callback.
	v.attempts = r.count(`SELECT COUNT(*) FROM callback_attempt WHERE outcome = 'SUCCESS'`)
	require.Equal(t, n, v.attempts, "SUCCESS attempts")
	require.Equal(t, n, r.count(`SELECT COUNT(DISTINCT log_id) FROM callback_attempt WHERE outcome = 'SUCCESS'`))

	// Two outbox rows per callback, the expected ids, all SENT.
	v.outbox = r.count(`SELECT COUNT(*) FROM outbox`)
	require.Equal(t, 2*n, v.outbox, "outbox rows")
	require.Zero(t, r.count(`SELECT COUNT(*) FROM (SELECT callback_log_id FROM outbox GROUP BY callback_log_id HAVING COUNT(*) <> 2) x`),
		"callbacks with other than 2 outbox rows")
	require.Zero(t, r.count(`SELECT COUNT(*) FROM outbox WHERE status <> 'SENT'`))
	want := map[string]int64{}
	for _, id := range accepted {
		want[fmt.Sprintf("cb%d.warehouse.ship", id)] = id
		want[fmt.Sprintf("cb%d.points.add", id)] = id
	}
	require.Len(t, want, 2*n)
	var outboxMissing int
	res, err = r.db.Query(`SELECT message_id FROM outbox`)
	require.NoError(t, err)
	for res.Next() {
		var m string
		require.NoError(t, res.Scan(&m))
		if _, ok := want[m]; !ok {
			outboxMissing++
		}
	}
	require.NoError(t, res.Err())
	_ = res.Close() //nolint:sqlclosecheck // closed before the next query reuses res
	require.Zero(t, outboxMissing, "outbox rows with unexpected message ids")

	// Downstream: every message id at least once.
	got := drainDownstream(t, r.cfg.AMQP.Prefix+".downstream.test", want)
	var missing []string
	for m := range want {
		if got.ids[m] == 0 {
			missing = append(missing, m)
		}
	}
	require.Empty(t, got.unexpected, "downstream messages nobody expected")
	require.Empty(t, got.badCorrelation, "downstream messages whose correlation_id is not their log id")
	require.Empty(t, missing, "%d of %d notifications never reached the downstream queue (lost)", len(missing), len(want))
	v.distinct = len(got.ids)
	v.deliveries = got.total
	v.duplicates = got.total - len(got.ids)
	return v
}

// downstreamResult is what the downstream queue held.
type downstreamResult struct {
	ids            map[string]int
	total          int
	unexpected     []string
	badCorrelation []string
}

// drainDownstream consumes queue until every wanted message id arrived and
// nothing more came for a second (or, short of that, for 10s), on its own
// connection (the test queue's may be from before a broker restart).
func drainDownstream(t *testing.T, queue string, want map[string]int64) downstreamResult {
	t.Helper()
	conn, err := amqp.Dial(testenv.AMQPURL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Qos(2000, 0, false))
	deliveries, err := ch.Consume(queue, "", true, true, false, false, nil)
	require.NoError(t, err)
	out := downstreamResult{ids: map[string]int{}}
	seen := 0
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		quiet := 10 * time.Second
		if seen == len(want) {
			quiet = time.Second
		}
		select {
		case d, ok := <-deliveries:
			require.True(t, ok, "downstream consumer closed")
			out.total++
			id, known := want[d.MessageId]
			if !known {
				out.unexpected = append(out.unexpected, d.MessageId)
				continue
			}
			if d.CorrelationId != fmt.Sprint(id) {
				out.badCorrelation = append(out.badCorrelation, d.MessageId+" correlation_id="+d.CorrelationId)
			}
			if out.ids[d.MessageId] == 0 {
				seen++
			}
			out.ids[d.MessageId]++
		case <-time.After(quiet):
			return out
		}
	}
	return out
}

// Broker control: TestBrokerRestart stops and starts the RabbitMQ
// application of a broker of its own, callgate-fault@localhost on 5684
// in slot 0 of scripts/ha.sh (up fault starts it; make test-faults does;
// another slot's has another name and port). The servers
// on 3306 and 5672 are never stopped: MySQL is taken away with a proxy.

// faultBroker is the broker TestBrokerRestart stops: its AMQP URL and
// node name, from scripts/ha.sh env fault.
func faultBroker() (url, node string, err error) {
	url, node = os.Getenv("CALLGATE_FAULT_AMQP_URL"), os.Getenv("CALLGATE_FAULT_MQ_NODE")
	if url == "" || node == "" {
		return "", "", fmt.Errorf("CALLGATE_FAULT_AMQP_URL and CALLGATE_FAULT_MQ_NODE are unset: " +
			"run make test-faults (scripts/ha.sh up fault starts the broker this test stops; the one on 5672 is never stopped)")
	}
	return url, node, nil
}

// useFaultBroker points the test (testenv's broker, so the rig's
// processes, its downstream queue and its cleanup) at the fault broker,
// and returns its node name.
func useFaultBroker(t *testing.T) string {
	t.Helper()
	url, node, err := faultBroker()
	require.NoError(t, err)
	t.Setenv("CALLGATE_TEST_AMQP_URL", url)
	require.NoError(t, ensureBroker(url, node))
	return node
}

// stopBroker stops node's RabbitMQ application, waits until it refuses
// AMQP connections (so nothing can publish), and makes sure it is started
// again when the test ends, whatever happens.
func stopBroker(t *testing.T, node string) {
	t.Helper()
	url := testenv.AMQPURL()
	t.Cleanup(func() {
		if err := ensureBroker(url, node); err != nil {
			t.Errorf("restarting %s after the test: %v", node, err)
		}
	})
	out, err := rabbitmqctl(faultLimit, "-n", node, "stop_app")
	require.NoError(t, err, "rabbitmqctl stop_app: %s", out)
	waitFor(t, faultLimit, func() bool { return dialBroker(url) != nil }, node+" refuses AMQP connections after stop_app")
}

// startBroker starts node's application and waits until it takes
// connections.
func startBroker(t *testing.T, node string) {
	t.Helper()
	out, err := rabbitmqctl(faultLimit, "-n", node, "start_app")
	require.NoError(t, err, "rabbitmqctl start_app: %s", out)
	require.NoError(t, waitBroker(testenv.AMQPURL(), faultLimit))
}

// ensureBroker starts node's application if url does not take
// connections (a run killed in the middle of TestBrokerRestart left it
// stopped).
func ensureBroker(url, node string) error {
	if waitBroker(url, 2*time.Second) == nil {
		return nil
	}
	if out, err := rabbitmqctl(60*time.Second, "-n", node, "start_app"); err != nil {
		return fmt.Errorf("rabbitmqctl start_app: %w: %s", err, out)
	}
	return waitBroker(url, 60*time.Second)
}

// waitBroker waits until an AMQP connection to url succeeds.
func waitBroker(url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		if err = dialBroker(url); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("broker not back after %s: %w", limit, err)
}

// dialBroker opens an AMQP connection and a channel to url, and closes
// them: nil when the broker takes connections.
func dialBroker(url string) error {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	return ch.Close()
}

func rabbitmqctl(limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := execOutput(ctx, "rabbitmqctl", args...)
	return strings.TrimSpace(out), err
}

func execOutput(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
