// Package testenv gives integration tests what they need from the real
// services: a fresh, migrated MariaDB database and a fresh RabbitMQ prefix
// per test, both removed afterwards, plus the shipped config pointed at
// them. No mocks: tests talk to the real MariaDB and RabbitMQ (started by
// .ci/run and `make test`).
//
// CALLGATE_TEST_MYSQL_DSN (default root:@tcp(127.0.0.1:3306)/) and
// CALLGATE_TEST_AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/) point
// the tests elsewhere.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/store"
)

// MySQLServerDSN is the server the tests create their databases on.
func MySQLServerDSN() string {
	if v := os.Getenv("CALLGATE_TEST_MYSQL_DSN"); v != "" {
		return v
	}
	return "root:@tcp(127.0.0.1:3306)/"
}

// AMQPURL is the broker the tests use.
func AMQPURL() string {
	if v := os.Getenv("CALLGATE_TEST_AMQP_URL"); v != "" {
		return v
	}
	return broker.URLDefault
}

// RepoRoot is the module root: the nearest directory holding go.mod,
// from the working directory up (go test runs a package's tests in its
// directory). Not from this file's compiled-in path, which -trimpath (make
// test: the build cache then outlives the clone's path) makes relative.
func RepoRoot() string {
	repoRootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			panic("testenv: " + err.Error())
		}
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				repoRoot = d
				return
			}
			if filepath.Dir(d) == d {
				panic("testenv: no go.mod above " + dir)
			}
		}
	})
	return repoRoot
}

var (
	repoRootOnce sync.Once
	repoRoot     string
)

// Suffix returns a short random name part.
func Suffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// DB creates a database holding what the migrations make (a copy of
// the schema they made in this process: schema.go) and returns its DSN.
// The database is dropped when the test ends.
func DB(t testing.TB) string {
	t.Helper()
	c, err := mysql.ParseDSN(MySQLServerDSN())
	require.NoError(t, err)
	c.DBName = "callgate_t_" + Suffix()
	dsn := c.FormatDSN()
	s, err := migratedSchema(MySQLServerDSN())
	require.NoError(t, err, "migrating test database (is MariaDB running on 127.0.0.1:3306?)")
	t.Cleanup(func() {
		root, err := sql.Open("mysql", MySQLServerDSN())
		if err != nil {
			return
		}
		defer root.Close()
		_, _ = root.Exec("DROP DATABASE IF EXISTS `" + c.DBName + "`")
	})
	require.NoError(t, createFrom(*c, s), "creating test database")
	return dsn
}

// Prefix returns a fresh exchange/queue prefix whose topology is deleted
// when the test ends.
func Prefix(t testing.TB) string {
	t.Helper()
	prefix := "t" + Suffix()
	t.Cleanup(func() { DeleteTopology(prefix) })
	return prefix
}

// DeleteTopology removes the queues and exchanges of prefix.
func DeleteTopology(prefix string) {
	conn, err := amqp.Dial(AMQPURL())
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	defer ch.Close()
	for _, k := range kinds.Names() {
		_, _ = ch.QueueDelete(prefix+"."+k, false, false, false)
	}
	for _, q := range []string{"downstream.test", "downstream.unrouted"} {
		_, _ = ch.QueueDelete(prefix+"."+q, false, false, false)
	}
	for _, x := range []string{"callbacks", "downstream", "downstream.unrouted"} {
		_ = ch.ExchangeDelete(prefix+"."+x, false, false)
	}
}

// Config loads the shipped configs/callgate.yaml and points it at a fresh
// database and prefix, with worker.order_grace at 1ns (an unknown order
// fails at once). mutate (optional) edits it before validation.
func Config(t testing.TB, mutate ...func(*config.Config)) *config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join(RepoRoot(), "configs", "callgate.yaml"), kinds.Names())
	require.NoError(t, err)
	cfg.MySQL.DSN = DB(t)
	// The tests share one server (max_connections 151 by default) with
	// each other and with another make test beside them: pools of the
	// shipped 64, each keeping 64 idle connections, ran it out ("Error
	// 1040: Too many connections") when two runs met. Tests that need
	// more set their own.
	cfg.MySQL.MaxOpenConns = 32
	cfg.MySQL.MaxIdleConns = 4
	cfg.AMQP.URL = AMQPURL()
	cfg.AMQP.Prefix = Prefix(t)
	cfg.AMQP.ReconnectMin = 100 * time.Millisecond
	cfg.AMQP.ReconnectMax = time.Second
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.HTTP.ShutdownTimeout = 5 * time.Second
	cfg.Log.Level = "warn"
	cfg.Worker.MetricsAddr = "127.0.0.1:0"
	cfg.Demo = true // the tests sign with the demo sources' secrets
	// The tests read the gateway's /metrics on its one listener.
	cfg.Metrics.Public = true
	// A payment of an order that does not exist fails at once; the tests
	// of worker.order_grace set their own.
	cfg.Worker.OrderGrace = time.Nanosecond
	for _, m := range mutate {
		m(cfg)
	}
	require.NoError(t, cfg.Validate(kinds.Names()))
	return cfg
}

// TestStore is the store of a test's database, plus direct access to that
// database (DB, SQL) for setting up and asserting what the store's
// operations do not cover. Production code goes through internal/store
// only.
type TestStore struct {
	*store.Store
	DB  *gorm.DB
	SQL *sql.DB
}

// Store opens the config's database: its store, and a connection of the
// test's own for assertions.
func Store(t testing.TB, cfg *config.Config) *TestStore {
	t.Helper()
	st, err := store.Open(cfg.MySQL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	dsn, err := store.NormalizeDSN(cfg.MySQL.DSN, cfg.MySQL.DialTimeout)
	require.NoError(t, err)
	db, err := gorm.Open(gormmysql.Open(dsn), &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	return &TestStore{Store: st, DB: db, SQL: sqlDB}
}

func testingVerboseLogs() bool { return os.Getenv("CALLGATE_TEST_LOG") != "" }

// WaitStatus waits up to 20 s for callback id to reach status want and
// returns it.
func (st *TestStore) WaitStatus(t testing.TB, id int64, want callback.Status) *callback.Log {
	t.Helper()
	var l *callback.Log
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := st.GetCallback(context.Background(), id)
		if err == nil {
			l = got
			if l.Status == want {
				break
			}
		}
		if time.Now().After(deadline) {
			require.FailNow(t, fmt.Sprintf("callback %d never became %s (%s)", id, want, lastState(l)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return l
}

// NoFollow is an HTTP client that shows redirects instead of following them.
var NoFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// lastState is what a callback last was, for a failed wait's message.
func lastState(l *callback.Log) string {
	if l == nil {
		return "not found"
	}
	s := fmt.Sprintf("%s after %d attempts", l.Status, l.Attempts)
	if l.LastError != nil {
		s += ": " + *l.LastError
	}
	return s
}
