// Package config is callgate's one YAML file: its shape and its loading.
// Each section is the Config of the component it configures (store.Config
// for mysql, broker.Config for amqp, worker.Config, scheduler.Config,
// source.Config for each of sources, ...), which documents its keys and
// owns their defaults (WithDefaults) and checks (Validate). This package
// reads the file, expands ${VAR} references, applies the CALLGATE_*
// environment overrides, fills the defaults and reports every bad field at
// once; it builds nothing from the result.
//
// Two sections are declared here: http and admin configure the gateway's
// HTTP server and the operators' tokens, whose packages (internal/gateway,
// internal/admin) are HTTP packages that the worker, which reads the same
// file, must not link.
package config

import (
	"time"

	"callgate/internal/broker"
	"callgate/internal/logging"
	"callgate/internal/metrics"
	"callgate/internal/replay"
	"callgate/internal/scheduler"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/tracing"
	"callgate/internal/worker"
)

// Config is the whole file.
type Config struct {
	// Demo switches on the sources whose secrets are the
	// documented demo values (docs/getting-started.md) (paydemo, shipdemo as shipped). Off by
	// default: such a source is then disabled (404), since anyone who read
	// the documentation could sign for it. Env CALLGATE_DEMO=1 (make run sets it).
	Demo      bool             `yaml:"demo"`
	HTTP      HTTP             `yaml:"http"`
	MySQL     store.Config     `yaml:"mysql"`
	AMQP      broker.Config    `yaml:"amqp"`
	Admin     Admin            `yaml:"admin"`
	Log       logging.Config   `yaml:"log"`
	Worker    worker.Config    `yaml:"worker"`
	Scheduler scheduler.Config `yaml:"scheduler"`
	Tracing   tracing.Config   `yaml:"tracing"`
	Metrics   metrics.Config   `yaml:"metrics"`
	Sources   []source.Config  `yaml:"sources"`
	// DeadLetters bounds the notifications each preset source stores
	// though it cannot read them (gateway only).
	DeadLetters DeadLetters `yaml:"dead_letters"`
}

// HTTP configures the gateway's listeners: the file's http section.
type HTTP struct {
	// Addr is the listen address. Default ":8080"; env CALLGATE_HTTP_ADDR.
	Addr string `yaml:"addr"`
	// AdminAddr, when set (e.g. "127.0.0.1:9091"), serves /admin/ (page
	// and API) and /metrics on their own listener, and Addr then serves
	// only POST /callbacks/:source, /healthz and /readyz. Default "": all
	// on Addr. Env CALLGATE_HTTP_ADMIN_ADDR.
	AdminAddr string `yaml:"admin_addr"`
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// SIGTERM. Default 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Server timeouts, so a slow client cannot hold connections. Defaults:
	// read_header 5s, read 15s, write 15s, idle 60s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes caps the request headers. Default 32 KiB.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// TLSCertFile and TLSKeyFile switch on TLS (for deployments without a
	// terminating proxy). Both or neither.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// PprofAddr serves net/http/pprof on a separate listener (for
	// profiling, e.g. "127.0.0.1:6060"). Default "": off. Never expose it.
	// Env CALLGATE_HTTP_PPROF_ADDR.
	PprofAddr string `yaml:"pprof_addr"`
}

// HTTP defaults.
const (
	HTTPAddrDefault              = ":8080"
	HTTPShutdownTimeoutDefault   = 10 * time.Second
	HTTPReadHeaderTimeoutDefault = 5 * time.Second
	HTTPReadTimeoutDefault       = 15 * time.Second
	HTTPWriteTimeoutDefault      = 15 * time.Second
	HTTPIdleTimeoutDefault       = 60 * time.Second
	HTTPMaxHeaderBytesDefault    = 32 << 10
)

// WithDefaults returns a copy with every unset field at its default.
func (h HTTP) WithDefaults() HTTP {
	if h.Addr == "" {
		h.Addr = HTTPAddrDefault
	}
	if h.ShutdownTimeout == 0 {
		h.ShutdownTimeout = HTTPShutdownTimeoutDefault
	}
	if h.ReadHeaderTimeout == 0 {
		h.ReadHeaderTimeout = HTTPReadHeaderTimeoutDefault
	}
	if h.ReadTimeout == 0 {
		h.ReadTimeout = HTTPReadTimeoutDefault
	}
	if h.WriteTimeout == 0 {
		h.WriteTimeout = HTTPWriteTimeoutDefault
	}
	if h.IdleTimeout == 0 {
		h.IdleTimeout = HTTPIdleTimeoutDefault
	}
	if h.MaxHeaderBytes == 0 {
		h.MaxHeaderBytes = HTTPMaxHeaderBytesDefault
	}
	return h
}

// Admin configures the operator surface: the file's admin section.
type Admin struct {
	// Token is "name:secret[,name:secret...]" or a bare secret. Empty: the
	// admin surface is off. Env CALLGATE_ADMIN_TOKEN.
	Token string `yaml:"token"`
	// SecureCookie marks the console's session cookie Secure even when
	// the gateway itself serves plain HTTP (behind a TLS-terminating
	// proxy). The file's default is SecureCookieDefault (true): browsers
	// accept Secure cookies from http://localhost, so only a plain-HTTP
	// deployment on another host needs false.
	SecureCookie bool `yaml:"secure_cookie"`
	// TrustedProxies are the addresses (IPs or CIDR prefixes) of the
	// proxies in front of the operator surface: a request whose TCP peer
	// is one of them names its client by X-Forwarded-For (the rightmost
	// address that is not a trusted proxy), so that the failed-login
	// limiters count each person apart rather than the proxy for all.
	// Empty: the TCP peer, X-Forwarded-For ignored.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Replay bounds bulk replays (replay_cap, replay_rate).
	Replay replay.Config `yaml:",inline"`
	// OIDC signs operators in with the company's single sign-on.
	OIDC OIDC `yaml:"oidc"`
}

// OIDC is admin.oidc: OpenID Connect sign-in for the console. Off while
// Issuer is empty.
type OIDC struct {
	// Issuer is the provider's issuer URL (discovery is read from
	// Issuer/.well-known/openid-configuration). Env CALLGATE_OIDC_ISSUER.
	Issuer string `yaml:"issuer"`
	// ClientID and ClientSecret are callgate's client at the provider.
	// Env CALLGATE_OIDC_CLIENT_ID, CALLGATE_OIDC_CLIENT_SECRET (or
	// CALLGATE_OIDC_CLIENT_SECRET_FILE).
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// RedirectURL is registered at the provider; its path is
	// /admin/oidc/callback. Env CALLGATE_OIDC_REDIRECT_URL.
	RedirectURL string `yaml:"redirect_url"`
	// RolesClaim is the ID token claim holding the person's groups
	// (default "groups"; a dotted path reaches into objects).
	RolesClaim string `yaml:"roles_claim"`
	// Operators and Viewers are claim values granting each role
	// (operator wins). Env CALLGATE_OIDC_OPERATORS, CALLGATE_OIDC_VIEWERS,
	// comma-separated.
	Operators []string `yaml:"operators"`
	Viewers   []string `yaml:"viewers"`
	// Only hides the console's token form (API tokens keep working).
	Only bool `yaml:"only"`
	// MaxSession bounds a session's life without signing in again
	// (default 8h).
	MaxSession time.Duration `yaml:"max_session"`
	// Scopes asked for (default openid, email, profile).
	Scopes []string `yaml:"scopes"`
}

// SecureCookieDefault is admin.secure_cookie when the file leaves it out.
const SecureCookieDefault = true
