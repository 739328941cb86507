// Package config loads callgate's one YAML file, expands ${VAR} references
// from the environment, applies the CALLGATE_* environment overrides, fills
// defaults and validates the result, reporting every bad field at once.
//
// It owns the shape of the file and its defaults. It does not build anything
// from it: each component turns its part of the Config into a working object.
package config

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/netip"
	"os"
	"strings"
	"text/template"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"

	"callgate/internal/signature"
)

// DefaultPath is the file read when neither -config nor CALLGATE_CONFIG names one.
const DefaultPath = "configs/callgate.yaml"

// EnvConfigPath names the environment variable that chooses the config file.
const EnvConfigPath = "CALLGATE_CONFIG"

// envOverrides maps the public environment variables onto config keys. They
// win over the file.
var envOverrides = []struct{ env, key string }{
	{"CALLGATE_MYSQL_DSN", "mysql.dsn"},
	{"CALLGATE_AMQP_URL", "amqp.url"},
	{"CALLGATE_AMQP_PREFIX", "amqp.prefix"},
	{"CALLGATE_HTTP_ADDR", "http.addr"},
	{"CALLGATE_ADMIN_TOKEN", "admin.token"},
}

// Config is the whole file.
type Config struct {
	HTTP      HTTP      `koanf:"http"`
	MySQL     MySQL     `koanf:"mysql"`
	AMQP      AMQP      `koanf:"amqp"`
	Admin     Admin     `koanf:"admin"`
	Log       Log       `koanf:"log"`
	Worker    Worker    `koanf:"worker"`
	Scheduler Scheduler `koanf:"scheduler"`
	Tracing   Tracing   `koanf:"tracing"`
	Sources   []Source  `koanf:"sources"`
}

// Tracing configures span export. The trace context travels either way.
type Tracing struct {
	// OTLPEndpoint (e.g. http://otel-collector:4318) switches span export
	// over OTLP/HTTP on. Default "": off.
	OTLPEndpoint string `koanf:"otlp_endpoint"`
}

// Scheduler configures the worker's background jobs.
type Scheduler struct {
	// Lease is how long a worker holds the scheduler leadership without
	// renewing it; when the holder dies another takes over within it.
	// Default 15s.
	Lease        time.Duration `koanf:"lease"`
	Compensation Compensation  `koanf:"compensation"`
	OutboxRelay  OutboxRelay   `koanf:"outbox_relay"`
	Stuck        Periodic      `koanf:"stuck"`
	Retention    Retention     `koanf:"retention"`
	// Gauges refreshes the backlog gauges (interval only). Default 15s.
	Gauges Periodic `koanf:"gauges"`
}

// Periodic is a job's interval and batch size.
type Periodic struct {
	Interval  time.Duration `koanf:"interval"`
	BatchSize int           `koanf:"batch_size"`
}

// Retention deletes old SUCCESS callbacks and SENT outbox rows.
type Retention struct {
	// Interval between runs. Default 10m.
	Interval time.Duration `koanf:"interval"`
	// MaxAge: rows older than this go. Default 720h (30 days); 0 keeps
	// everything. FAILED callbacks are never deleted.
	MaxAge time.Duration `koanf:"max_age"`
	// BatchSize rows per short transaction. Default 500.
	BatchSize int `koanf:"batch_size"`
}

// Compensation re-announces PENDING callbacks that are due: retries whose
// backoff has passed, and callbacks whose announcement was lost.
type Compensation struct {
	// Interval between scans. Default 1s.
	Interval time.Duration `koanf:"interval"`
	// Threshold: a PENDING callback is announced again when it has not been
	// processed this long after it was received or last announced. The
	// gateway sets next_attempt_at = received_at + Threshold. Default 1m.
	Threshold time.Duration `koanf:"threshold"`
	// BatchSize rows are claimed per transaction, oldest due first. Default 500.
	BatchSize int `koanf:"batch_size"`
	// MaxQueued skips a kind whose queue already holds more ready messages
	// than this (a backlog: its announcements are still queued). Default 1000.
	MaxQueued int `koanf:"max_queued"`
}

// OutboxRelay publishes outbox rows the fast path left behind.
type OutboxRelay struct {
	// Interval between passes. Default 1s.
	Interval time.Duration `koanf:"interval"`
	// MinAge leaves younger rows to the fast path. Default 5s.
	MinAge time.Duration `koanf:"min_age"`
	// BatchSize rows per transaction. Default 100.
	BatchSize int `koanf:"batch_size"`
}

// HTTP configures the gateway's listener.
type HTTP struct {
	// Addr is the listen address. Default ":8080"; env CALLGATE_HTTP_ADDR.
	Addr string `koanf:"addr"`
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// SIGTERM. Default 10s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// Server timeouts, so a slow client cannot hold connections. Defaults:
	// read_header 5s, read 15s, write 15s, idle 60s.
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"`
	ReadTimeout       time.Duration `koanf:"read_timeout"`
	WriteTimeout      time.Duration `koanf:"write_timeout"`
	IdleTimeout       time.Duration `koanf:"idle_timeout"`
	// MaxHeaderBytes caps the request headers. Default 32 KiB.
	MaxHeaderBytes int `koanf:"max_header_bytes"`
	// TLSCertFile and TLSKeyFile switch on TLS (for deployments without a
	// terminating proxy). Both or neither.
	TLSCertFile string `koanf:"tls_cert_file"`
	TLSKeyFile  string `koanf:"tls_key_file"`
	// PprofAddr serves net/http/pprof on a separate listener (for
	// profiling, e.g. "127.0.0.1:6060"). Default "": off. Never expose it.
	PprofAddr string `koanf:"pprof_addr"`
	// AdminAddr, when set (e.g. "127.0.0.1:9091"), serves /admin/ (page
	// and API) and /metrics on their own listener, and Addr then serves
	// only POST /callbacks/:source, /healthz and /readyz. Default "": all
	// on Addr.
	AdminAddr string `koanf:"admin_addr"`
}

// MySQL configures the database pool.
type MySQL struct {
	// DSN in go-sql-driver form. Env CALLGATE_MYSQL_DSN. parseTime, UTC and
	// interpolateParams are forced on by the store.
	DSN string `koanf:"dsn"`
	// MaxOpenConns caps the pool. Default 64.
	MaxOpenConns int `koanf:"max_open_conns"`
	// MaxIdleConns keeps warm connections. Default 64.
	MaxIdleConns int `koanf:"max_idle_conns"`
	// ConnMaxLifetime recycles connections. Default 30m.
	ConnMaxLifetime time.Duration `koanf:"conn_max_lifetime"`
	// DialTimeout bounds connecting, so a dead server answers fast. Default 1s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// IntakeTimeout bounds the intake's INSERT; past it the platform gets a
	// 503 and retries. Default 2s.
	IntakeTimeout time.Duration `koanf:"intake_timeout"`
	// GroupCommit makes concurrent intake requests share one multi-row
	// INSERT and commit. Default true; false is one INSERT per request.
	GroupCommit bool `koanf:"group_commit"`
	// GroupCommitWriters batches may be in flight at once. Default 2.
	GroupCommitWriters int `koanf:"group_commit_writers"`
	// GroupCommitMaxBatch bounds a batch. Default 256.
	GroupCommitMaxBatch int `koanf:"group_commit_max_batch"`
}

// AMQP configures the RabbitMQ connection and topology.
type AMQP struct {
	// URL of the broker. Env CALLGATE_AMQP_URL.
	URL string `koanf:"url"`
	// Prefix of every exchange and queue name. Default "callgate"; env
	// CALLGATE_AMQP_PREFIX.
	Prefix string `koanf:"prefix"`
	// QueueType is "classic" (default) or "quorum" (for a RabbitMQ cluster).
	QueueType string `koanf:"queue_type"`
	// AnnounceBuffer is how many announcements may wait for the broker
	// before the intake stops queueing them (the rows stay PENDING and the
	// compensation job announces them). Default 10000.
	AnnounceBuffer int `koanf:"announce_buffer"`
	// ConfirmWindow is how many publishes may await their confirm at once.
	// Default 256.
	ConfirmWindow int `koanf:"confirm_window"`
	// ReconnectMin and ReconnectMax bound the redial backoff. Defaults 500ms, 30s.
	ReconnectMin time.Duration `koanf:"reconnect_min"`
	ReconnectMax time.Duration `koanf:"reconnect_max"`
}

// Admin configures the operator surface.
type Admin struct {
	// Token is "name:secret[,name:secret...]" or a bare secret. Empty: the
	// admin surface is off. Env CALLGATE_ADMIN_TOKEN.
	Token string `koanf:"token"`
	// ReplayCap is the largest bulk replay allowed without confirm_large.
	// Default 10000.
	ReplayCap int `koanf:"replay_cap"`
	// ReplayRate is how many callbacks per second a bulk replay announces.
	// Default 200.
	ReplayRate int `koanf:"replay_rate"`
	// SecureCookie marks the page's session cookie Secure even when the
	// gateway itself serves plain HTTP (behind a TLS-terminating proxy).
	// Default true: browsers accept Secure cookies from http://localhost,
	// so only a plain-HTTP deployment on another host needs false.
	SecureCookie bool `koanf:"secure_cookie"`
}

// Log configures log/slog.
type Log struct {
	// Level is debug, info (default), warn or error.
	Level string `koanf:"level"`
	// Format is json (default) or text.
	Format string `koanf:"format"`
}

// Worker configures the worker process.
type Worker struct {
	// ID names this worker in callback_attempt rows. Default: hostname-pid.
	ID string `koanf:"id"`
	// HandlerTimeout bounds one callback's transaction. Default 30s.
	HandlerTimeout time.Duration `koanf:"handler_timeout"`
	// ShutdownTimeout bounds how long in-flight callbacks may finish after
	// SIGTERM. Default 20s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// MetricsAddr serves GET /metrics and /healthz. Default ":9090"; "off"
	// disables it.
	MetricsAddr string `koanf:"metrics_addr"`
	// Kinds holds per-kind consumer settings, keyed by kind.
	Kinds map[string]KindWorker `koanf:"kinds"`
}

// KindWorker is one kind's consumer settings.
type KindWorker struct {
	// Concurrency is how many callbacks of this kind run at once. Default 8.
	Concurrency int `koanf:"concurrency"`
	// Prefetch bounds unacked deliveries. Default 2 x Concurrency.
	Prefetch int `koanf:"prefetch"`
}

// Source is one platform that calls us.
type Source struct {
	// Name is the :source path segment. Required, unique.
	Name string `koanf:"name"`
	// Kind selects the worker handler and queue: payment or logistics.
	Kind string `koanf:"kind"`
	// Signature says how requests are verified.
	Signature Signature `koanf:"signature"`
	// EventID says where the idempotency key comes from.
	EventID EventID `koanf:"event_id"`
	// BusinessKey is the JSON field (dot path) holding the business key.
	BusinessKey string `koanf:"business_key"`
	// MaxBodyBytes caps the body. Default 1 MiB.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// Response is what a platform gets on success.
	Response Response `koanf:"response"`
	// Retry drives the worker's backoff for this source.
	Retry Retry `koanf:"retry"`
	// RateLimit caps this source's requests (token bucket); off when rate
	// is 0. Over it: 429 with Retry-After.
	RateLimit RateLimit `koanf:"rate_limit"`
	// AllowIPs, if set, are the CIDRs (or addresses) allowed to call this
	// source; others get 403. The client address is the TCP peer (put
	// callgate behind a proxy only if the proxy itself is allowed).
	AllowIPs []string `koanf:"allow_ips"`
	// ContentTypes, if set, are the media types accepted (e.g.
	// application/json); others get 415.
	ContentTypes []string `koanf:"content_types"`
	// MaskFields are JSON fields (dot paths) masked in the admin API and
	// page; the stored payload stays intact for replay.
	MaskFields []string `koanf:"mask_fields"`
}

// RateLimit is a token bucket.
type RateLimit struct {
	// Rate is requests per second; 0 switches the limit off.
	Rate float64 `koanf:"rate"`
	// Burst is the bucket size. Default: max(1, rate).
	Burst int `koanf:"burst"`
}

// Signature is a source's verification scheme and its options.
type Signature struct {
	// Scheme is standard-webhooks, hmac-sha256, stripe or none.
	Scheme string `koanf:"scheme"`
	// Secrets are tried in order; several allow rotation.
	Secrets []string `koanf:"secrets"`
	// Header holds the signature (hmac-sha256: default X-Signature; stripe:
	// default Stripe-Signature).
	Header string `koanf:"header"`
	// Encoding is hex (default) or base64 (hmac-sha256).
	Encoding string `koanf:"encoding"`
	// Prefix is stripped from the header value, e.g. "sha256=" (hmac-sha256).
	Prefix string `koanf:"prefix"`
	// Tolerance is the accepted clock difference (standard-webhooks, stripe).
	// Default 5m (applied by internal/signature).
	Tolerance time.Duration `koanf:"tolerance"`
	// AllowUnsigned must be true for scheme none.
	AllowUnsigned bool `koanf:"allow_unsigned"`
}

// EventID says how to find a callback's idempotency key.
type EventID struct {
	// Fields are JSON fields (dot paths) whose values, joined by Separator,
	// form the event id when the scheme provides none.
	Fields []string `koanf:"fields"`
	// Separator joins Fields. Default ":".
	Separator string `koanf:"separator"`
	// IgnoreScheme uses Fields even when the scheme carries an id (such as
	// Standard Webhooks' webhook-id). Default false.
	IgnoreScheme bool `koanf:"ignore_scheme"`
}

// Response is the success answer a platform expects.
type Response struct {
	// ContentType of Body. Default application/json.
	ContentType string `koanf:"content_type"`
	// Body is a Go text/template with .LogID, .Duplicate, .EventID. Empty:
	// {"status":"accepted","log_id":N,"duplicate":false}.
	Body string `koanf:"body"`
}

// Retry is a source's retry policy.
type Retry struct {
	// MaxAttempts before FAILED. Default 8.
	MaxAttempts int `koanf:"max_attempts"`
	// Initial delay before the second attempt. Default 5s.
	Initial time.Duration `koanf:"initial"`
	// Max caps the delay. Default 10m.
	Max time.Duration `koanf:"max"`
}

// Defaults.
const (
	HTTPAddrDefault              = ":8080"
	ShutdownTimeoutDefault       = 10 * time.Second
	MaxOpenConnsDefault          = 64
	ConnMaxLifetimeDefault       = 30 * time.Minute
	DialTimeoutDefault           = time.Second
	IntakeTimeoutDefault         = 2 * time.Second
	PrefixDefault                = "callgate"
	QueueTypeClassic             = "classic"
	QueueTypeQuorum              = "quorum"
	AnnounceBufferDefault        = 10000
	ConfirmWindowDefault         = 256
	ReconnectMinDefault          = 500 * time.Millisecond
	ReconnectMaxDefault          = 30 * time.Second
	MaxBodyBytesDefault          = 1 << 20
	MaxBodyBytesLimit            = 1<<24 - 1 // MEDIUMBLOB
	SeparatorDefault             = ":"
	ContentTypeDefault           = "application/json"
	RetryMaxAttemptsDefault      = 8
	RetryInitialDefault          = 5 * time.Second
	RetryMaxDefault              = 10 * time.Minute
	KindConcurrencyDefault       = 8
	HandlerTimeoutDefault        = 30 * time.Second
	WorkerShutdownTimeoutDefault = 20 * time.Second
	CompensationIntervalDefault  = time.Second
	CompensationThresholdDefault = time.Minute
	CompensationBatchDefault     = 500
	RelayIntervalDefault         = time.Second
	RelayMinAgeDefault           = 5 * time.Second
	RelayBatchDefault            = 100
	LeaseDefault                 = 15 * time.Second
	ReplayCapDefault             = 10000
	ReplayRateDefault            = 200
	StuckIntervalDefault         = time.Minute
	RetentionIntervalDefault     = 10 * time.Minute
	RetentionMaxAgeDefault       = 30 * 24 * time.Hour
	GaugesIntervalDefault        = 15 * time.Second
	WorkerMetricsAddrDefault     = ":9090"
	DefaultAMQPURL               = "amqp://guest:guest@127.0.0.1:5672/"
	DefaultMySQLDSN              = "root:@tcp(127.0.0.1:3306)/callgate"
	LogLevelDefault              = "info"
	LogFormatDefault             = "json"
	schemeStandardWebhooks       = "standard-webhooks"
	maxSourceNameLen             = 64
	maxExpandedConfigDepth       = 32
	prefixAllowedPunctuation     = "-_."
)

// Load reads the file at path, expands ${VAR} and ${VAR:-default} in its
// string values, applies the environment overrides, fills defaults and
// validates. kinds lists the callback kinds this build knows.
func Load(path string, kinds []string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading config file: %w", err)
	}
	return Parse(raw, kinds)
}

// Parse is Load for bytes already read.
func Parse(raw []byte, kinds []string) (*Config, error) {
	tree, err := yaml.Parser().Unmarshal(raw)
	if err != nil {
		return nil, fmt.Errorf("error parsing config YAML: %w", err)
	}
	expandTree(tree, 0)

	k := koanf.New(".")
	if err := k.Load(confmap.Provider(tree, ""), nil); err != nil {
		return nil, fmt.Errorf("error loading config: %w", err)
	}
	for _, o := range envOverrides {
		if v, ok := os.LookupEnv(o.env); ok && v != "" {
			if err := k.Set(o.key, v); err != nil {
				return nil, fmt.Errorf("error applying %s: %w", o.env, err)
			}
		}
	}

	var cfg Config
	err = k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook:       mapstructure.StringToTimeDurationHookFunc(),
			ErrorUnused:      true,
			WeaklyTypedInput: true,
			TagName:          "koanf",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	if !k.Exists("mysql.group_commit") {
		cfg.MySQL.GroupCommit = true
	}
	if !k.Exists("admin.secure_cookie") {
		cfg.Admin.SecureCookie = true
	}
	if !k.Exists("scheduler.retention.max_age") {
		cfg.Scheduler.Retention.MaxAge = RetentionMaxAgeDefault // an explicit 0 keeps everything
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(kinds); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// PathFromEnv returns CALLGATE_CONFIG, or DefaultPath.
func PathFromEnv() string {
	if p := os.Getenv(EnvConfigPath); p != "" {
		return p
	}
	return DefaultPath
}

// expandTree replaces ${VAR} and ${VAR:-default} in every string of a parsed
// YAML tree. Expanding after parsing means a secret holding YAML syntax
// cannot change the file's structure.
func expandTree(v any, depth int) any {
	if depth > maxExpandedConfigDepth {
		return v
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = expandTree(e, depth+1)
		}
	case []any:
		for i, e := range t {
			t[i] = expandTree(e, depth+1)
		}
	case string:
		return Expand(t)
	}
	return v
}

// Expand substitutes ${VAR} and ${VAR:-default} (default used when VAR is
// unset or empty) from the environment. When VAR is unset but VAR_FILE
// names a file, the file's content (without trailing newlines) is used:
// secrets can come from mounted files. $VAR without braces is left alone so
// that secrets containing '$' survive.
func Expand(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		expr := s[i+2 : i+j]
		name, def, hasDef := strings.Cut(expr, ":-")
		val := os.Getenv(name)
		if f := os.Getenv(name + "_FILE"); val == "" && f != "" {
			if b, err := os.ReadFile(f); err == nil {
				val = strings.TrimRight(string(b), "\r\n")
			}
		}
		if val == "" && hasDef {
			val = def
		}
		b.WriteString(val)
		s = s[i+j+1:]
	}
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.HTTP.Addr == "" {
		c.HTTP.Addr = HTTPAddrDefault
	}
	if c.HTTP.ShutdownTimeout == 0 {
		c.HTTP.ShutdownTimeout = ShutdownTimeoutDefault
	}
	if c.HTTP.ReadHeaderTimeout == 0 {
		c.HTTP.ReadHeaderTimeout = 5 * time.Second
	}
	if c.HTTP.ReadTimeout == 0 {
		c.HTTP.ReadTimeout = 15 * time.Second
	}
	if c.HTTP.WriteTimeout == 0 {
		c.HTTP.WriteTimeout = 15 * time.Second
	}
	if c.HTTP.IdleTimeout == 0 {
		c.HTTP.IdleTimeout = 60 * time.Second
	}
	if c.HTTP.MaxHeaderBytes == 0 {
		c.HTTP.MaxHeaderBytes = 32 << 10
	}
	if c.MySQL.DSN == "" {
		c.MySQL.DSN = DefaultMySQLDSN
	}
	if c.MySQL.MaxOpenConns == 0 {
		c.MySQL.MaxOpenConns = MaxOpenConnsDefault
	}
	if c.MySQL.MaxIdleConns == 0 {
		c.MySQL.MaxIdleConns = c.MySQL.MaxOpenConns
	}
	if c.MySQL.ConnMaxLifetime == 0 {
		c.MySQL.ConnMaxLifetime = ConnMaxLifetimeDefault
	}
	if c.MySQL.DialTimeout == 0 {
		c.MySQL.DialTimeout = DialTimeoutDefault
	}
	if c.MySQL.GroupCommitWriters == 0 {
		c.MySQL.GroupCommitWriters = 2
	}
	if c.MySQL.GroupCommitMaxBatch == 0 {
		c.MySQL.GroupCommitMaxBatch = 256
	}
	if c.MySQL.IntakeTimeout == 0 {
		c.MySQL.IntakeTimeout = IntakeTimeoutDefault
	}
	if c.AMQP.URL == "" {
		c.AMQP.URL = DefaultAMQPURL
	}
	if c.AMQP.Prefix == "" {
		c.AMQP.Prefix = PrefixDefault
	}
	if c.AMQP.QueueType == "" {
		c.AMQP.QueueType = QueueTypeClassic
	}
	if c.AMQP.AnnounceBuffer == 0 {
		c.AMQP.AnnounceBuffer = AnnounceBufferDefault
	}
	if c.AMQP.ConfirmWindow == 0 {
		c.AMQP.ConfirmWindow = ConfirmWindowDefault
	}
	if c.AMQP.ReconnectMin == 0 {
		c.AMQP.ReconnectMin = ReconnectMinDefault
	}
	if c.AMQP.ReconnectMax == 0 {
		c.AMQP.ReconnectMax = ReconnectMaxDefault
	}
	if c.Log.Level == "" {
		c.Log.Level = LogLevelDefault
	}
	if c.Log.Format == "" {
		c.Log.Format = LogFormatDefault
	}
	if c.Worker.HandlerTimeout == 0 {
		c.Worker.HandlerTimeout = HandlerTimeoutDefault
	}
	if c.Worker.ShutdownTimeout == 0 {
		c.Worker.ShutdownTimeout = WorkerShutdownTimeoutDefault
	}
	if c.Scheduler.Compensation.Interval == 0 {
		c.Scheduler.Compensation.Interval = CompensationIntervalDefault
	}
	if c.Scheduler.Compensation.Threshold == 0 {
		c.Scheduler.Compensation.Threshold = CompensationThresholdDefault
	}
	if c.Scheduler.Compensation.MaxQueued == 0 {
		c.Scheduler.Compensation.MaxQueued = 1000
	}
	if c.Scheduler.Compensation.BatchSize == 0 {
		c.Scheduler.Compensation.BatchSize = CompensationBatchDefault
	}
	if c.Scheduler.Lease == 0 {
		c.Scheduler.Lease = LeaseDefault
	}
	if c.Scheduler.Stuck.Interval == 0 {
		c.Scheduler.Stuck.Interval = StuckIntervalDefault
	}
	if c.Scheduler.Stuck.BatchSize == 0 {
		c.Scheduler.Stuck.BatchSize = CompensationBatchDefault
	}
	if c.Scheduler.Retention.Interval == 0 {
		c.Scheduler.Retention.Interval = RetentionIntervalDefault
	}
	if c.Scheduler.Retention.BatchSize == 0 {
		c.Scheduler.Retention.BatchSize = CompensationBatchDefault
	}
	if c.Scheduler.Gauges.Interval == 0 {
		c.Scheduler.Gauges.Interval = GaugesIntervalDefault
	}
	if c.Admin.ReplayCap == 0 {
		c.Admin.ReplayCap = ReplayCapDefault
	}
	if c.Admin.ReplayRate == 0 {
		c.Admin.ReplayRate = ReplayRateDefault
	}
	if c.Worker.MetricsAddr == "" {
		c.Worker.MetricsAddr = WorkerMetricsAddrDefault
	}
	if c.Scheduler.OutboxRelay.Interval == 0 {
		c.Scheduler.OutboxRelay.Interval = RelayIntervalDefault
	}
	if c.Scheduler.OutboxRelay.MinAge == 0 {
		c.Scheduler.OutboxRelay.MinAge = RelayMinAgeDefault
	}
	if c.Scheduler.OutboxRelay.BatchSize == 0 {
		c.Scheduler.OutboxRelay.BatchSize = RelayBatchDefault
	}
	kinds := make(map[string]KindWorker, len(c.Worker.Kinds))
	for name, kw := range c.Worker.Kinds {
		kinds[name] = kw.withDefaults()
	}
	c.Worker.Kinds = kinds
	sources := make([]Source, len(c.Sources))
	for i, s := range c.Sources {
		sources[i] = s.withDefaults()
	}
	c.Sources = sources
	return c
}

// KindWorker returns the consumer settings of kind, defaults filled.
func (c Config) KindWorker(kind string) KindWorker {
	return c.Worker.Kinds[kind].withDefaults()
}

func (k KindWorker) withDefaults() KindWorker {
	if k.Concurrency == 0 {
		k.Concurrency = KindConcurrencyDefault
	}
	if k.Prefetch == 0 {
		k.Prefetch = 2 * k.Concurrency
	}
	return k
}

func (s Source) withDefaults() Source {
	if s.MaxBodyBytes == 0 {
		s.MaxBodyBytes = MaxBodyBytesDefault
	}
	if s.EventID.Separator == "" {
		s.EventID.Separator = SeparatorDefault
	}
	if s.Response.ContentType == "" {
		s.Response.ContentType = ContentTypeDefault
	}
	if s.Retry.MaxAttempts == 0 {
		s.Retry.MaxAttempts = RetryMaxAttemptsDefault
	}
	if s.RateLimit.Rate > 0 && s.RateLimit.Burst == 0 {
		s.RateLimit.Burst = max(1, int(s.RateLimit.Rate))
	}
	if s.Retry.Initial == 0 {
		s.Retry.Initial = RetryInitialDefault
	}
	if s.Retry.Max == 0 {
		s.Retry.Max = RetryMaxDefault
	}
	return s
}

// Validate reports every problem at once, each naming its field. The
// signature block is checked by building its verifier, so the scheme's own
// rules live in one place (internal/signature).
func (c Config) Validate(kinds []string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.AMQP.QueueType != QueueTypeClassic && c.AMQP.QueueType != QueueTypeQuorum {
		bad("amqp.queue_type", "want classic or quorum, got %q", c.AMQP.QueueType)
	}
	if !validName(c.AMQP.Prefix) {
		bad("amqp.prefix", "%q: use letters, digits, '-', '_' and '.'", c.AMQP.Prefix)
	}
	if c.AMQP.AnnounceBuffer < 0 {
		bad("amqp.announce_buffer", "must not be negative")
	}
	if c.AMQP.ConfirmWindow < 1 {
		bad("amqp.confirm_window", "must be at least 1")
	}
	if c.Scheduler.Compensation.Interval < 0 || c.Scheduler.Compensation.Threshold < 0 || c.Scheduler.Compensation.BatchSize < 1 {
		bad("scheduler.compensation", "interval and threshold must be positive, batch_size at least 1")
	}
	if c.Admin.ReplayCap < 1 || c.Admin.ReplayRate < 1 {
		bad("admin", "replay_cap and replay_rate must be at least 1")
	}
	if c.Scheduler.Lease < time.Second {
		bad("scheduler.lease", "must be at least 1s")
	}
	if c.Scheduler.Retention.MaxAge < 0 || c.Scheduler.Retention.BatchSize < 1 || c.Scheduler.Stuck.BatchSize < 1 {
		bad("scheduler.retention", "max_age must not be negative, batch sizes at least 1")
	}
	if c.Scheduler.OutboxRelay.Interval < 0 || c.Scheduler.OutboxRelay.MinAge < 0 || c.Scheduler.OutboxRelay.BatchSize < 1 {
		bad("scheduler.outbox_relay", "interval and min_age must be positive, batch_size at least 1")
	}
	if c.MySQL.GroupCommitWriters < 1 || c.MySQL.GroupCommitMaxBatch < 1 {
		bad("mysql.group_commit_writers", "writers and max batch must be at least 1")
	}
	if (c.HTTP.TLSCertFile == "") != (c.HTTP.TLSKeyFile == "") {
		bad("http.tls_cert_file", "tls_cert_file and tls_key_file go together")
	}
	if c.HTTP.AdminAddr != "" {
		// Port 0 (any free port, in tests) on both is not a clash.
		if _, port, err := net.SplitHostPort(c.HTTP.AdminAddr); err != nil {
			bad("http.admin_addr", "want host:port, e.g. 127.0.0.1:9091, got %q", c.HTTP.AdminAddr)
		} else if c.HTTP.AdminAddr == c.HTTP.Addr && port != "0" {
			bad("http.admin_addr", "must differ from http.addr (%s)", c.HTTP.Addr)
		}
	}
	if c.MySQL.MaxOpenConns < 1 {
		bad("mysql.max_open_conns", "must be at least 1")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		bad("log.format", "want json or text, got %q", c.Log.Format)
	}
	known := map[string]bool{}
	for _, k := range kinds {
		known[k] = true
	}
	for kind, kw := range c.Worker.Kinds {
		field := "worker.kinds." + kind
		if !known[kind] {
			bad(field, "unknown kind %q (want one of %s)", kind, strings.Join(kinds, ", "))
		}
		if kw.Concurrency < 1 {
			bad(field+".concurrency", "must be at least 1")
		}
		if kw.Prefetch < kw.Concurrency {
			bad(field+".prefetch", "must be at least the concurrency (%d)", kw.Concurrency)
		}
	}
	if len(c.Sources) == 0 {
		bad("sources", "at least one source is required")
	}
	seen := map[string]int{}
	for i, s := range c.Sources {
		field := fmt.Sprintf("sources[%d]", i)
		switch {
		case s.Name == "":
			bad(field+".name", "is required")
		case !validName(s.Name) || len(s.Name) > maxSourceNameLen:
			bad(field+".name", "%q: use at most %d letters, digits, '-', '_' and '.'", s.Name, maxSourceNameLen)
		default:
			if j, dup := seen[s.Name]; dup {
				bad(field+".name", "duplicate source name %q (also sources[%d])", s.Name, j)
			}
			seen[s.Name] = i
		}
		if !known[s.Kind] {
			bad(field+".kind", "unknown kind %q (want one of %s)", s.Kind, strings.Join(kinds, ", "))
		}
		if s.BusinessKey == "" {
			bad(field+".business_key", "is required (the JSON field holding the business key)")
		}
		if len(s.EventID.Fields) == 0 && (s.Signature.Scheme != schemeStandardWebhooks || s.EventID.IgnoreScheme) {
			bad(field+".event_id.fields", "is required unless the scheme provides the event id")
		}
		for j, f := range s.EventID.Fields {
			if f == "" {
				bad(fmt.Sprintf("%s.event_id.fields[%d]", field, j), "must not be empty")
			}
		}
		if _, err := signature.New(s.Signature.VerifierConfig()); err != nil {
			errs = append(errs, prefixErrors(field+".signature.", err))
		}
		if s.Response.Body != "" {
			if _, err := template.New(s.Name).Parse(s.Response.Body); err != nil {
				bad(field+".response.body", "invalid template: %v", err)
			}
		}
		if s.RateLimit.Rate < 0 || s.RateLimit.Burst < 0 {
			bad(field+".rate_limit", "rate and burst must not be negative")
		}
		for j, cidr := range s.AllowIPs {
			if _, err := ParseCIDR(cidr); err != nil {
				bad(fmt.Sprintf("%s.allow_ips[%d]", field, j), "%q is not an address or CIDR", cidr)
			}
		}
		for j, ct := range s.ContentTypes {
			if _, _, err := mime.ParseMediaType(ct); err != nil {
				bad(fmt.Sprintf("%s.content_types[%d]", field, j), "%q is not a media type", ct)
			}
		}
		if s.MaxBodyBytes < 1 {
			bad(field+".max_body_bytes", "must be positive")
		}
		if s.MaxBodyBytes > MaxBodyBytesLimit {
			bad(field+".max_body_bytes", "%d is more than callback_log.payload (MEDIUMBLOB) holds: at most %d", s.MaxBodyBytes, MaxBodyBytesLimit)
		}
		if s.Retry.MaxAttempts < 1 {
			bad(field+".retry.max_attempts", "must be at least 1")
		}
		if s.Retry.Initial < 0 || s.Retry.Max < s.Retry.Initial {
			bad(field+".retry", "want 0 < initial <= max")
		}
	}
	return errors.Join(errs...)
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(prefixAllowedPunctuation, r)
		if !ok {
			return false
		}
	}
	return true
}

// VerifierConfig converts the file's signature block for internal/signature.
func (s Signature) VerifierConfig() signature.Config {
	return signature.Config{
		Scheme:        s.Scheme,
		Secrets:       s.Secrets,
		Header:        s.Header,
		Encoding:      s.Encoding,
		Prefix:        s.Prefix,
		Tolerance:     s.Tolerance,
		AllowUnsigned: s.AllowUnsigned,
	}
}

// prefixErrors puts prefix before each error joined in err.
func prefixErrors(prefix string, err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, prefixErrors(prefix, e))
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("%s%w", prefix, err)
}

// ParseCIDR reads "10.0.0.0/8" or a bare address ("192.0.2.7", "::1").
func ParseCIDR(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// WithDefaultsForTest fills a source's defaults (for tests that build
// sources in code).
func (s Source) WithDefaultsForTest() Source { return s.withDefaults() }
