package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"callgate/internal/demo"
	"callgate/internal/scheduler"
	"callgate/internal/store"
)

// DefaultPath is the file read when neither -config nor CALLGATE_CONFIG names one.
const DefaultPath = "configs/callgate.yaml"

// EnvConfigPath names the environment variable that chooses the config file.
const EnvConfigPath = "CALLGATE_CONFIG"

// envOverrides are the public environment variables that win over the
// file, the setting (YAML path) each sets, and how.
var envOverrides = []struct {
	env, path string
	set       func(c *Config, v string)
	// file: when env is unset, env_FILE may name a file holding the value.
	file bool
}{
	{"CALLGATE_MYSQL_DSN", "mysql.dsn", func(c *Config, v string) { c.MySQL.DSN = v }, false},
	{"CALLGATE_MYSQL_DURABILITY", "mysql.durability", func(c *Config, v string) { c.MySQL.Durability = v }, false},
	{"CALLGATE_AMQP_URL", "amqp.url", func(c *Config, v string) { c.AMQP.URL, c.AMQP.URLs = v, nil }, false},
	{"CALLGATE_AMQP_URLS", "amqp.urls", func(c *Config, v string) { c.AMQP.URL, c.AMQP.URLs = "", splitList(v) }, false},
	{"CALLGATE_AMQP_PREFIX", "amqp.prefix", func(c *Config, v string) { c.AMQP.Prefix = v }, false},
	{EnvHTTPAddr, "http.addr", func(c *Config, v string) { c.HTTP.Addr = v }, false},
	{EnvHTTPAdminAddr, "http.admin_addr", func(c *Config, v string) { c.HTTP.AdminAddr = v }, false},
	{EnvHTTPPprofAddr, "http.pprof_addr", func(c *Config, v string) { c.HTTP.PprofAddr = v }, false},
	{"CALLGATE_ADMIN_TOKEN", "admin.token", func(c *Config, v string) { c.Admin.Token = v }, false},
	{"CALLGATE_OIDC_ISSUER", "admin.oidc.issuer", func(c *Config, v string) { c.Admin.OIDC.Issuer = v }, false},
	{"CALLGATE_OIDC_CLIENT_ID", "admin.oidc.client_id", func(c *Config, v string) { c.Admin.OIDC.ClientID = v }, false},
	{"CALLGATE_OIDC_CLIENT_SECRET", "admin.oidc.client_secret", func(c *Config, v string) { c.Admin.OIDC.ClientSecret = v }, true},
	{"CALLGATE_OIDC_REDIRECT_URL", "admin.oidc.redirect_url", func(c *Config, v string) { c.Admin.OIDC.RedirectURL = v }, false},
	{"CALLGATE_OIDC_OPERATORS", "admin.oidc.operators", func(c *Config, v string) { c.Admin.OIDC.Operators = splitList(v) }, false},
	{"CALLGATE_OIDC_VIEWERS", "admin.oidc.viewers", func(c *Config, v string) { c.Admin.OIDC.Viewers = splitList(v) }, false},
	{EnvDemo, "demo", func(c *Config, v string) { c.Demo = v == "1" || strings.EqualFold(v, "true") }, false},
	{"CALLGATE_METRICS_PUBLIC", "metrics.public", func(c *Config, v string) { c.Metrics.Public = v == "1" || strings.EqualFold(v, "true") }, false},
	// The same name as worker.MetricsAddrEnv (TestWorkerMetricsAddr).
	{"CALLGATE_WORKER_METRICS_ADDR", "worker.metrics_addr", func(c *Config, v string) { c.Worker.MetricsAddr = v }, false},
	// The same name as worker.PprofAddrEnv (TestEveryListenerHasAVariable).
	{"CALLGATE_WORKER_PPROF_ADDR", "worker.pprof_addr", func(c *Config, v string) { c.Worker.PprofAddr = v }, false},
}

// EnvHTTPAddr names the environment variable that overrides http.addr
// (the gateway names it when the address is in use).
const EnvHTTPAddr = "CALLGATE_HTTP_ADDR"

// EnvHTTPAdminAddr and EnvHTTPPprofAddr name the environment variables
// that override http.admin_addr and http.pprof_addr: every listener has
// one, so that a port taken on this machine is moved without editing the
// file (the gateway names it when the address is in use).
const (
	EnvHTTPAdminAddr = "CALLGATE_HTTP_ADMIN_ADDR"
	EnvHTTPPprofAddr = "CALLGATE_HTTP_PPROF_ADDR"
)

// envDurations are the public environment variables holding a duration
// that win over the file.
var envDurations = []struct {
	env, path string
	field     func(c *Config) *time.Duration
}{
	{"CALLGATE_RECONCILE_AFTER", "scheduler.reconcile.after", func(c *Config) *time.Duration { return &c.Scheduler.Reconcile.After }},
	{"CALLGATE_RECONCILE_INTERVAL", "scheduler.reconcile.interval", func(c *Config) *time.Duration { return &c.Scheduler.Reconcile.Interval }},
}

// splitList splits a comma-separated value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// EnvDemo names the environment variable that switches demo mode on
// (CALLGATE_DEMO=1): the sources with documented demo secrets serve.
const EnvDemo = "CALLGATE_DEMO"

// Load reads the file at path, expands ${VAR} and ${VAR:-default} in its
// string values, applies the environment overrides, fills defaults and
// validates. kinds lists the callback kinds this build knows. Each problem
// is one line of the error: "path: line N: setting: what is wrong", or
// "CALLGATE_X: setting: what is wrong" for a value from the environment.
func Load(path string, kinds []string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading config file: %w", err)
	}
	cfg, err := Parse(raw, kinds)
	if err != nil {
		return nil, inFile(path, err)
	}
	return cfg, nil
}

// Parse is Load for bytes already read, its problems without the file's
// name.
//
// The file is decoded over the defaults a file leaves out (fileDefaults),
// so a key that is absent keeps its default and one that is present wins,
// also when it is false or 0 (group_commit: false, retention max_age: 0).
// Unknown keys and values of the wrong type are refused, with their line
// and path (checkKeys), before anything is decoded.
func Parse(raw []byte, kinds []string) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, yamlError(raw, err)
	}
	orig := map[*yaml.Node]string{}
	expandNode(&root, 0, orig)
	if errs := checkKeys(&root, reflect.TypeOf(Config{}), orig); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg := fileDefaults()
	if len(root.Content) > 0 { // an empty file is all defaults
		if err := root.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("invalid config: %w", err)
		}
	}
	fromEnv := map[string]string{} // setting → the variable that set it
	for _, o := range envOverrides {
		if v, ok := os.LookupEnv(o.env); ok && v != "" {
			o.set(&cfg, v)
			fromEnv[o.path] = o.env
		} else if f := os.Getenv(o.env + "_FILE"); o.file && f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, &envError{env: o.env + "_FILE", err: fmt.Errorf("cannot read the file it names: %w", err)}
			}
			o.set(&cfg, strings.TrimRight(string(b), "\r\n"))
			fromEnv[o.path] = o.env + "_FILE"
		}
	}
	for _, d := range envDurations {
		if v := os.Getenv(d.env); v != "" {
			dur, err := time.ParseDuration(v)
			if err != nil || dur <= 0 {
				return nil, &envError{env: d.env, err: fmt.Errorf("%q is not a positive duration (like 10m or 1h30m)", v)}
			}
			*d.field(&cfg) = dur
			fromEnv[d.path] = d.env
		}
	}
	if cfg.Demo && cfg.Admin.Token == "" && cfg.Admin.OIDC.Issuer == "" {
		// Demo mode opens the admin side with the published demo token
		// (refused outside demo mode, by Validate).
		cfg.Admin.Token = demo.AdminToken
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(kinds); err != nil {
		return nil, blame(err, &root, fromEnv)
	}
	return &cfg, nil
}

// fileDefaults are the values a file that leaves a key out gets where the
// zero value would mean something else.
func fileDefaults() Config {
	var c Config
	c.MySQL.GroupCommit = store.GroupCommitDefault
	c.Admin.SecureCookie = SecureCookieDefault
	c.Scheduler.Retention.MaxAge = scheduler.RetentionMaxAgeDefault
	c.Scheduler.Retention.DeadLetterMaxAge = scheduler.RetentionDeadLetterMaxAgeDefault
	c.Scheduler.Retention.DedupeMaxAge = scheduler.RetentionDedupeMaxAgeDefault
	c.DeadLetters.MaxPerHour = DeadLettersMaxPerHourDefault
	c.DeadLetters.MaxBytesPerHour = DeadLettersMaxBytesPerHourDefault
	return c
}

// PathFromEnv returns CALLGATE_CONFIG, or DefaultPath.
func PathFromEnv() string {
	if p := os.Getenv(EnvConfigPath); p != "" {
		return p
	}
	return DefaultPath
}
