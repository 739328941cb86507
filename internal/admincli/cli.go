// Package admincli is the terminal side of the operator console: `worker
// replay ...` talks to the gateway's admin API (never to the database
// directly), so every replay from a terminal is authenticated, rate-limited
// and audited exactly like one from the web page.
package admincli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Env names.
const (
	EnvURL   = "CALLGATE_ADMIN_URL"
	EnvToken = "CALLGATE_ADMIN_TOKEN"
)

// Replay runs `worker replay` with args and returns the exit code.
//
//	worker replay --id N --reason "..." [--force]
//	worker replay --status FAILED --source S --since 2026-01-02T00:00:00Z --reason "..." [--dry-run] [--confirm-large]
//	worker replay --since 24h --reason "..."   (received in the last 24 hours)
func Replay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ReplayWith(ctx, Defaults{}, args, stdout, stderr)
}

// Defaults are what `worker replay` falls back on where neither its flags
// nor the environment say (worker replay -config PATH takes them from the
// config file): the gateway's base URL and its admin.token.
type Defaults struct {
	URL   string
	Token string
	// DemoToken says Token is the demo admin token, which only a gateway
	// in demo mode accepts: a refusal then says to set CALLGATE_ADMIN_TOKEN.
	DemoToken bool
}

// tokenHelp says where the admin token comes from, as ReplayWith takes
// it: the environment first, else the defaults.
func tokenHelp(d Defaults) string {
	switch {
	case d.DemoToken:
		return "The admin token comes from " + EnvToken + ". Unset, the demo token " + d.Token +
			" is sent: a gateway in demo mode (make run, CALLGATE_DEMO=1) without admin tokens of its own accepts it; any other refuses it."
	case d.Token != "":
		return "The admin token comes from " + EnvToken + ", else from the config file's admin.token."
	}
	return "The admin token comes from " + EnvToken + "."
}

// ReplayWith is Replay with defaults.
func ReplayWith(ctx context.Context, d Defaults, args []string, stdout, stderr io.Writer) int {
	if d.URL == "" {
		d.URL = "http://127.0.0.1:8080"
	}
	fs := flag.NewFlagSet("worker replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		id            = fs.Int64("id", 0, "replay one callback by log id")
		reason        = fs.String("reason", "", "why (required; goes into the audit trail)")
		force         = fs.Bool("force", false, "with --id: also replay a SUCCESS callback")
		status        = fs.String("status", "", "bulk: FAILED (default) or SUCCESS")
		source        = fs.String("source", "", "bulk: source name")
		kind          = fs.String("kind", "", "bulk: kind")
		since         = fs.String("since", "", "bulk: received at or after (RFC 3339, or a duration like 24h: that long ago)")
		until         = fs.String("until", "", "bulk: received before (RFC 3339, or a duration like 1h: that long ago)")
		errorContains = fs.String("error-contains", "", "bulk: last_error contains")
		ids           = fs.String("ids", "", "bulk: comma-separated log ids")
		dryRun        = fs.Bool("dry-run", false, "bulk: only count and show a sample")
		confirmLarge  = fs.Bool("confirm-large", false, "bulk: allow more than the configured cap")
		url           = fs.String("url", envOr(EnvURL, d.URL), "gateway base URL (env "+EnvURL+")")
		wait          = fs.Bool("wait", true, "bulk: follow the job with a progress bar until it ends")
	)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: worker replay --id N --reason TEXT [--force]")
		fmt.Fprintln(fs.Output(), "       worker replay [--status FAILED] [--source S] [--kind K] [--since T] [--until T] [--error-contains X] [--ids 1,2] --reason TEXT [--dry-run] [--confirm-large]")
		fmt.Fprintln(fs.Output(), tokenHelp(d))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "replay: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	now := time.Now()
	for _, f := range []struct {
		name string
		v    *string
	}{{"since", since}, {"until", until}} {
		t, err := parseTime(*f.v, now)
		if err != nil {
			fmt.Fprintf(stderr, "replay: --%s: %v\n", f.name, err)
			return 2
		}
		*f.v = t
	}
	token, demo := tokenFromEnv(), false
	if token == "" {
		token, demo = firstToken(d.Token), d.DemoToken
	}
	if token == "" {
		fmt.Fprintln(stderr, "replay: set "+EnvToken+" to an admin token")
		return 2
	}
	c := &client{base: strings.TrimRight(*url, "/"), token: token, demo: demo, http: &http.Client{Timeout: 30 * time.Second}}

	if *id > 0 {
		if *reason == "" && !*dryRun {
			fmt.Fprintln(stderr, "replay: --reason is required")
			return 2
		}
		var res struct {
			Callback struct {
				ID     int64  `json:"id"`
				Status string `json:"status"`
				Source string `json:"source"`
				Key    string `json:"business_key"`
			} `json:"callback"`
		}
		if err := c.do(ctx, http.MethodPost, fmt.Sprintf("/admin/api/callbacks/%d/replay", *id), map[string]any{"reason": *reason, "force": *force}, &res); err != nil {
			fmt.Fprintf(stderr, "replay: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "replayed callback %d (%s, key %s): now %s\n", res.Callback.ID, res.Callback.Source, res.Callback.Key, res.Callback.Status)
		return 0
	}

	filter := map[string]any{}
	for k, v := range map[string]string{"status": *status, "source": *source, "kind": *kind, "since": *since, "until": *until, "error_contains": *errorContains} {
		if v != "" {
			filter[k] = v
		}
	}
	if *ids != "" {
		var list []int64
		for _, s := range strings.Split(*ids, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				fmt.Fprintf(stderr, "replay: --ids: %q is not a log id\n", s)
				return 2
			}
			list = append(list, n)
		}
		filter["ids"] = list
	}
	if len(filter) == 0 {
		fmt.Fprintln(stderr, "replay: give --id, or a filter (--status, --source, --kind, --since, --until, --error-contains, --ids)")
		fs.Usage()
		return 2
	}
	if *reason == "" && !*dryRun {
		fmt.Fprintln(stderr, "replay: --reason is required")
		return 2
	}
	body := map[string]any{"filter": filter, "reason": *reason, "dry_run": *dryRun, "confirm_large": *confirmLarge}
	if *dryRun {
		var res struct {
			Matched int64 `json:"matched"`
			OverCap bool  `json:"over_cap"`
			Cap     int   `json:"cap"`
			Sample  []struct {
				ID        int64   `json:"id"`
				Source    string  `json:"source"`
				Key       string  `json:"business_key"`
				LastError *string `json:"last_error"`
			} `json:"sample"`
		}
		if err := c.do(ctx, http.MethodPost, "/admin/api/replays", body, &res); err != nil {
			fmt.Fprintf(stderr, "replay: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "dry run: %d callbacks match\n", res.Matched)
		for _, s := range res.Sample {
			e := ""
			if s.LastError != nil {
				e = *s.LastError
			}
			fmt.Fprintf(stdout, "  %d  %s  %s  %s\n", s.ID, s.Source, s.Key, e)
		}
		if res.OverCap {
			fmt.Fprintf(stdout, "more than the cap of %d: the real run needs --confirm-large\n", res.Cap)
		}
		return 0
	}
	var job jobView
	if err := c.do(ctx, http.MethodPost, "/admin/api/replays", body, &job); err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "replay job %d: %d callbacks to replay\n", job.ID, job.Matched)
	if !*wait {
		return 0
	}
	return follow(ctx, c, job, stdout, stderr)
}

type jobView struct {
	ID       int64   `json:"id"`
	Status   string  `json:"status"`
	Matched  int     `json:"matched"`
	Replayed int     `json:"replayed"`
	Progress float64 `json:"progress"`
}

// follow polls the job and draws a progress bar until it ends.
func follow(ctx context.Context, c *client, job jobView, stdout, stderr io.Writer) int {
	bar := progressbar.NewOptions(max(job.Matched, 1),
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("job %d", job.ID)),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
	)
	for job.Status == "RUNNING" {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "\nreplay: stopped following; job %d keeps running (DELETE /admin/api/replays/%d cancels it)\n", job.ID, job.ID)
			return 1
		case <-time.After(500 * time.Millisecond):
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/admin/api/replays/%d", job.ID), nil, &job); err != nil {
			fmt.Fprintf(stderr, "\nreplay: %v\n", err)
			return 1
		}
		_ = bar.Set(min(job.Replayed, max(job.Matched, 1)))
	}
	_ = bar.Finish()
	fmt.Fprintf(stdout, "\nreplay job %d %s: %d of %d replayed\n", job.ID, job.Status, job.Replayed, job.Matched)
	if job.Status != "DONE" {
		return 1
	}
	return 0
}

type client struct {
	base  string
	token string
	demo  bool // token is the demo admin token, no one's choice
	http  *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the gateway: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 10<<20))
	if err != nil {
		return err
	}
	if c.demo && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound) {
		return fmt.Errorf("the gateway refused the demo admin token (HTTP %d): it works only with a gateway in demo mode, as make run starts it; set %s to one of the gateway's admin.token", resp.StatusCode, EnvToken)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s (HTTP %d)", e.Error, resp.StatusCode)
		}
		if resp.StatusCode == http.StatusNotFound {
			return errors.New("the admin API is off (no CALLGATE_ADMIN_TOKEN on the gateway) or the path is wrong (HTTP 404)")
		}
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// tokenFromEnv takes the first token of CALLGATE_ADMIN_TOKEN as it is
// written there (a bare token, or "name:secret[:role]"), which the API
// accepts whole: cutting it at the first colon sent "secret:role" for a
// token with a role, which no token matches.
func tokenFromEnv() string { return firstToken(os.Getenv(EnvToken)) }

func firstToken(v string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(v), ",")
	return strings.TrimSpace(first)
}

// parseTime reads --since or --until: an RFC 3339 time, or a duration
// (24h, 90m) meaning that long before now. It returns RFC 3339, or "" for "".
func parseTime(v string, now time.Time) (string, error) {
	if v == "" {
		return "", nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.Format(time.RFC3339Nano), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d).UTC().Format(time.RFC3339Nano), nil
	}
	return "", fmt.Errorf("%q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration like 24h (that long ago)", v)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
