package config

import (
	"callgate/internal/clientaddr"
	"callgate/internal/demo"
	"callgate/internal/outbound"
	"callgate/internal/source"
	"callgate/internal/store"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// WithDefaults returns a copy with every section's unset fields at their
// defaults.
func (c Config) WithDefaults() Config {
	c.HTTP = c.HTTP.WithDefaults()
	c.MySQL = c.MySQL.WithDefaults()
	c.AMQP = c.AMQP.WithDefaults()
	c.Admin.Replay = c.Admin.Replay.WithDefaults()
	c.Log = c.Log.WithDefaults()
	c.Worker = c.Worker.WithDefaults()
	c.Scheduler = c.Scheduler.WithDefaults()
	sources := make([]source.Config, len(c.Sources))
	for i, s := range c.Sources {
		sources[i] = s.WithDefaults()
	}
	c.Sources = sources
	return c
}

// Validate reports every problem of the file at once, each naming its field
// (section.key). kinds are the callback kinds this build knows.
func (c Config) Validate(kinds []string) error {
	var errs []error
	section := func(name string, err error) {
		if err != nil {
			errs = append(errs, prefixErrors(name+".", err))
		}
	}
	section("http", c.HTTP.validate())
	section("mysql", c.mysqlValidate())
	section("amqp", c.AMQP.Validate())
	section("admin", c.Admin.Replay.Validate())
	if _, err := clientaddr.ParseProxies(c.Admin.TrustedProxies); err != nil {
		section("admin", err)
	}
	if !c.Demo && demo.HoldsAdminToken(c.Admin.Token) {
		errs = append(errs, errors.New("admin.token: holds the published demo admin token, which works only in demo mode ("+EnvDemo+"=1): set a token of your own"))
	}
	section("admin.oidc", c.Admin.OIDC.validate())
	section("log", c.Log.Validate())
	section("worker", c.Worker.Validate(kinds))
	section("scheduler", c.Scheduler.Validate())
	// A lock wait that outlasts the handler's deadline would turn
	// contention (run again, no attempt) into failed attempts.
	if lw, ht := c.MySQL.LockWaitTimeout, c.Worker.WithDefaults().HandlerTimeout; lw > 0 && lw >= ht {
		errs = append(errs, fmt.Errorf("mysql.lock_wait_timeout: %s must be shorter than worker.handler_timeout (%s), or 0 for half of it", lw, ht))
	}
	// The intake's wait for the store ends before the server's write
	// deadline: an answer due after that deadline (the 503 of a store
	// timeout) cannot be written, and the platform sees the connection
	// closed with no answer at all.
	if it, wt := c.MySQL.WithDefaults().IntakeTimeout, c.HTTP.WithDefaults().WriteTimeout; it >= wt {
		errs = append(errs, fmt.Errorf("mysql.intake_timeout: %s must be shorter than http.write_timeout (%s): past the write timeout no answer can be written", it, wt))
	}
	if len(c.Sources) == 0 {
		errs = append(errs, errors.New("sources: at least one source is required"))
	}
	section("dead_letters", c.DeadLetters.validate(c.Sources))
	seen := map[string]int{}
	for i, s := range c.Sources {
		field := fmt.Sprintf("sources[%d]", i)
		if s.Name != "" {
			field += " (" + s.Name + ")"
		}
		section(field, s.Validate(kinds))
		if j, dup := seen[s.Name]; dup && s.Name != "" {
			errs = append(errs, fmt.Errorf("%s.name: duplicate source name %q (also sources[%d])", field, s.Name, j))
		}
		seen[s.Name] = i
	}
	return errors.Join(errs...)
}

// mysqlValidate is store.Config's Validate, with the driver's own words
// for a DSN it cannot parse (the store's add "invalid mysql.dsn", which
// would name the setting twice).
func (c Config) mysqlValidate() error {
	m := c.MySQL
	var dsnErr error
	if _, err := store.NormalizeDSN(m.DSN, m.DialTimeout); err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		dsnErr = fmt.Errorf("dsn: %w", err)
		m.DSN = store.DSNDefault
	}
	return errors.Join(dsnErr, m.Validate())
}

func (h HTTP) validate() error {
	var errs []error
	if (h.TLSCertFile == "") != (h.TLSKeyFile == "") {
		errs = append(errs, errors.New("tls_cert_file: tls_cert_file and tls_key_file go together"))
	}
	if h.AdminAddr != "" {
		// Port 0 (any free port, in tests) on both is not a clash.
		if _, port, err := net.SplitHostPort(h.AdminAddr); err != nil {
			errs = append(errs, fmt.Errorf("admin_addr: want host:port, e.g. 127.0.0.1:9091, got %q", h.AdminAddr))
		} else if h.AdminAddr == h.Addr && port != "0" {
			errs = append(errs, fmt.Errorf("admin_addr: must differ from http.addr (%s)", h.Addr))
		}
	}
	return errors.Join(errs...)
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

const (
	// oidcCallbackPath is the path admin.oidc.redirect_url must have (the
	// console serves the provider's redirect there).
	oidcCallbackPath = "/admin/oidc/callback"
	// oidcMinSecret is the shortest admin.oidc.client_secret accepted.
	oidcMinSecret = 16
	// oidcMaxSession is the longest admin.oidc.max_session: a role
	// removed at the provider must not live on for weeks.
	oidcMaxSession = 7 * 24 * time.Hour
)

func (o OIDC) validate() error {
	var errs []error
	if o.Issuer == "" {
		if o.ClientID != "" || o.ClientSecret != "" || o.RedirectURL != "" || len(o.Operators)+len(o.Viewers) > 0 || o.Only ||
			o.RolesClaim != "" || o.MaxSession != 0 || len(o.Scopes) > 0 {
			errs = append(errs, errors.New("issuer: required when any other admin.oidc setting is set (CALLGATE_OIDC_ISSUER)"))
		}
		return errors.Join(errs...)
	}
	if err := httpURL(o.Issuer); err != nil {
		errs = append(errs, fmt.Errorf("issuer: %w", err))
	}
	if o.ClientID == "" {
		errs = append(errs, errors.New("client_id: required with an issuer (CALLGATE_OIDC_CLIENT_ID)"))
	}
	if len(o.ClientSecret) < oidcMinSecret {
		// It also keys the MAC of the sign-in's flow cookie, which anyone
		// can get: a short secret could be guessed offline from one.
		errs = append(errs, fmt.Errorf("client_secret: required with an issuer, at least %d characters (the provider's generated secret): callgate is a confidential client (CALLGATE_OIDC_CLIENT_SECRET or _FILE)", oidcMinSecret))
	}
	if err := httpURL(o.RedirectURL); err != nil {
		errs = append(errs, fmt.Errorf("redirect_url: %w (CALLGATE_OIDC_REDIRECT_URL)", err))
	} else if u, _ := url.Parse(o.RedirectURL); u.Path != oidcCallbackPath || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, fmt.Errorf("redirect_url: its path must be %s, with no query, got %q", oidcCallbackPath, o.RedirectURL))
	}
	for field, list := range map[string][]string{"operators": o.Operators, "viewers": o.Viewers} {
		for i, v := range list {
			if strings.TrimSpace(v) != v || v == "" {
				errs = append(errs, fmt.Errorf("%s[%d]: %q: a claim value without blanks around it", field, i, v))
			}
		}
	}
	if len(o.Operators)+len(o.Viewers) == 0 {
		errs = append(errs, errors.New("operators: list the claim values (groups) of the operators and/or viewers, or nobody can sign in (CALLGATE_OIDC_OPERATORS, CALLGATE_OIDC_VIEWERS)"))
	}
	if o.MaxSession < 0 || (o.MaxSession > 0 && o.MaxSession < time.Minute) || o.MaxSession > oidcMaxSession {
		errs = append(errs, fmt.Errorf("max_session: want 1m to %s (default 8h), got %s", oidcMaxSession, o.MaxSession))
	}
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		errs = append(errs, errors.New("scopes: must include openid"))
	}
	return errors.Join(errs...)
}

// httpURL accepts an absolute https URL, or http to a loopback host (a
// provider or console on the same machine, as in development).
func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("want an absolute https URL, got %q", s)
	}
	if outbound.CheckURL(u) != nil {
		return fmt.Errorf("want https (http only to localhost or a loopback address), got %q", s)
	}
	return nil
}
