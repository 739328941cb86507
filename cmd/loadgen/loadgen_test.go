package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/signature"
	"callgate/internal/source"
)

// The callbacks loadgen sends are what paydemo's verifier and extractor
// accept, distinct per number, and about the configured size: a config or
// signature change that would make the benchmark measure 401s fails here.
func TestGeneratedCallbacksVerify(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "..", "configs", "callgate.yaml"), kinds.Names())
	if err != nil {
		t.Fatal(err)
	}
	var src *source.Config
	for i := range cfg.Sources {
		if cfg.Sources[i].Name == "paydemo" {
			src = &cfg.Sources[i]
		}
	}
	if src == nil {
		t.Fatal("no paydemo source")
	}
	v, err := signature.New(src.Signature.VerifierConfig())
	if err != nil {
		t.Fatal(err)
	}
	ex := callback.NewExtractor(src.EventID.Fields, src.EventID.Separator, src.BusinessKey, src.EventID.IgnoreScheme)

	g := &callbackGen{url: "http://127.0.0.1:1/callbacks/paydemo", secret: src.Signature.Secrets[0], tag: "t", runID: "r", payloadBytes: 1024, orders: 10}
	seen := map[string]bool{}
	for n := range 25 {
		req, err := g.request(n)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(req.Body)
		if len(body) < 1000 || len(body) > 1050 {
			t.Errorf("body of %d bytes, want about 1024", len(body))
		}
		var p map[string]any
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		if want := float64(orderAmount(n % 10)); p["amount"] != want || p["orderCode"] != orderCode(n%10) {
			t.Errorf("callback %d pays %v %v, want order %s amount %v", n, p["orderCode"], p["amount"], orderCode(n%10), want)
		}
		res, err := v.Verify(req.Header, body, time.Now())
		if err != nil {
			t.Fatalf("signature refused: %v", err)
		}
		id, key, err := ex.Extract(body, res.EventID)
		if err != nil {
			t.Fatal(err)
		}
		if id != g.eventID(n) || key != orderCode(n%10) || !strings.HasPrefix(id, g.eventPrefix()) {
			t.Errorf("event id %q key %q", id, key)
		}
		if seen[id] {
			t.Errorf("event id %q twice", id)
		}
		seen[id] = true
	}
}

func TestQuantiles(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarize(ds)
	if l.N != 1000 || l.P50 != 500 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 || l.Mean != 500.5 {
		t.Errorf("summary %+v", l)
	}
	if (summarize(nil) != Latency{}) {
		t.Error("empty summary")
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP callgate_outbox_published_total x
# TYPE callgate_outbox_published_total counter
callgate_outbox_published_total{path="fast",process="worker"} 10
callgate_outbox_published_total{path="relay",process="worker"} 2
callgate_callbacks_processed_total{kind="payment",outcome="success",process="worker"} 5
callgate_callbacks_processed_total{kind="payment",outcome="deferred",process="worker"} 1
go_goroutines 7
`)
	}))
	defer srv.Close()
	m, err := scrape(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.sum("callgate_outbox_published_total"); got != 12 {
		t.Errorf("published %v", got)
	}
	if got := m.sum("callgate_callbacks_processed_total", `outcome="success"`); got != 5 {
		t.Errorf("success %v", got)
	}
	if got := m.sum("go_goroutines"); got != 7 {
		t.Errorf("goroutines %v", got)
	}
	if got := m.sum("callgate_callbacks_processed_total", `kind="pay"`); got != 0 {
		t.Errorf("a label's value matches whole, not in part: %v", got)
	}
}

func TestProcReaders(t *testing.T) {
	pid := 1
	if _, ok := procCPU(pid); !ok {
		t.Skip("no /proc")
	}
	rss, hwm, ok := procMem(pid)
	if !ok || rss <= 0 || hwm < rss {
		t.Errorf("rss %d hwm %d", rss, hwm)
	}
	busy, total, irq := machineCPU()
	if total == 0 || busy > total || irq > busy {
		t.Errorf("busy %v total %v irq %v", busy, total, irq)
	}
	// Busy for a while: this process's CPU is then counted.
	deadline, x := time.Now().Add(2*time.Second), 0
	for cpu, _ := procCPU(os.Getpid()); cpu < 0.05 && time.Now().Before(deadline); cpu, _ = procCPU(os.Getpid()) {
		for i := range 1_000_000 {
			x ^= i
		}
	}
	if cpu, ok := procCPU(os.Getpid()); !ok || cpu < 0.05 {
		t.Errorf("this process's CPU: %v %v (%d)", cpu, ok, x)
	}
	if all := allProcCPU(); all[os.Getpid()].comm == "" {
		t.Errorf("this process is not among all processes")
	}
}

// TestFindProcByEnvironment: a process is found by a mark in its
// environment, as a RabbitMQ node of a cluster on one machine is known
// only by its RABBITMQ_NODENAME (bench-ha's -mq-proc).
func TestFindProcByEnvironment(t *testing.T) {
	mark := fmt.Sprintf("callgate-findproc-%d", os.Getpid())
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "RABBITMQ_NODENAME="+mark+"@localhost")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { return findProc("sleep", mark) == cmd.Process.Pid }, 5*time.Second, 20*time.Millisecond)
	require.Zero(t, findProc("sleep", mark+"-not-there"))
}
