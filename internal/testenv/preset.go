package testenv

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/worker"
)

// RawAnswer is an answer whose body need not be JSON (a platform's own
// success or failure answer).
type RawAnswer struct {
	Status int
	Header http.Header
	Body   []byte
}

// PostRaw sends body with headers to POST /callbacks/{source}.
func PostRaw(t testing.TB, baseURL, source string, body []byte, h http.Header) RawAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+"/callbacks/"+source, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return RawAnswer{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// WithPlatform returns a config mutation that gives the shipped source
// name its platform keys (enabling it).
func WithPlatform(name string, p platform.Config) func(*config.Config) {
	return func(cfg *config.Config) {
		for i := range cfg.Sources {
			if cfg.Sources[i].Name == name {
				if p.OrderPath == "" {
					p.OrderPath = cfg.Sources[i].Platform.OrderPath
				}
				cfg.Sources[i].Platform = p
				return
			}
		}
		panic("testenv: no source " + name + " in the shipped configuration")
	}
}

// Platform is a gateway and a worker running the shipped configuration
// with one preset source enabled: what a platform's end-to-end test needs.
type Platform struct {
	Cfg *config.Config
	GW  *Gateway
	St  *TestStore
}

// StartPlatform enables source name with keys p (see WithPlatform), and
// starts a gateway and a worker on a fresh database.
func StartPlatform(t testing.TB, name string, p platform.Config, mutate ...func(*config.Config)) *Platform {
	t.Helper()
	cfg := Config(t, append([]func(*config.Config){WithPlatform(name, p)}, mutate...)...)
	gw := StartGateway(t, cfg)
	gw.WaitReady(t)
	StartWorker(t, cfg, worker.Options{})
	return &Platform{Cfg: cfg, GW: gw, St: Store(t, cfg)}
}

// Post sends a request to the enabled source.
func (p *Platform) Post(t testing.TB, source string, body []byte, h http.Header) RawAnswer {
	t.Helper()
	return PostRaw(t, p.GW.URL, source, body, h)
}

// CreateOrder inserts an UNPAID order of amount (minor units of
// currency) for user 7.
func (p *Platform) CreateOrder(t testing.TB, code string, amount int64, currency string) {
	t.Helper()
	_, err := p.St.SQL.Exec(`INSERT INTO orders (order_code, user_id, amount, currency) VALUES (?, 7, ?, ?)`, code, amount, currency)
	require.NoError(t, err)
}

// Order reads an order.
func (p *Platform) Order(t testing.TB, code string) payment.Order {
	t.Helper()
	var o payment.Order
	require.NoError(t, p.St.DB.Where("order_code = ?", code).Take(&o).Error)
	return o
}

// Callbacks counts the callback_log rows of source.
func (p *Platform) Callbacks(t testing.TB, source string) int {
	t.Helper()
	var n int64
	require.NoError(t, p.St.DB.Table("callback_log").Where("source = ?", source).Count(&n).Error)
	return int(n)
}

// Settled returns the one callback of source with eventID, once the
// worker has settled it.
func (p *Platform) Settled(t testing.TB, source, eventID string) *callback.Log {
	t.Helper()
	var ids []int64
	require.NoError(t, p.St.DB.Table("callback_log").Where("source = ? AND event_id = ?", source, eventID).Pluck("id", &ids).Error)
	require.Len(t, ids, 1, "one callback_log row for %s %s", source, eventID)
	return p.St.WaitStatus(t, ids[0], callback.StatusSuccess)
}

// LastNote is the note of the callback's last attempt ("" if none).
func (p *Platform) LastNote(t testing.TB, logID int64) string {
	t.Helper()
	attempts, err := p.St.Attempts(t.Context(), logID)
	require.NoError(t, err)
	require.NotEmpty(t, attempts)
	if n := attempts[len(attempts)-1].Note; n != nil {
		return *n
	}
	return ""
}
