package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
	"callgate/internal/config"
	"callgate/internal/demo"
)

var kinds = []string{"payment", "logistics"}

const valid = `
sources:
  - name: paydemo
    kind: payment
    signature:
      scheme: standard-webhooks
      secrets: ["${T_PAY_SECRET:-whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}"]
    event_id: {fields: [paymentNo]}
    business_key: orderCode
  - name: shipdemo
    kind: logistics
    signature:
      scheme: hmac-sha256
      header: X-Signature
      secrets: ["${T_SHIP_SECRET}"]
    event_id: {fields: [waybillNo, seq]}
    business_key: waybillNo
`

func TestShippedConfigLoads(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "..", "configs", "callgate.yaml"), kinds)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cfg.Sources), 2)
	for _, s := range cfg.Sources[2:] {
		require.NotEmpty(t, s.Preset, "after the demo sources, one source per platform preset")
		require.True(t, s.Disabled(), "%s: without its keys in the environment a preset source is disabled", s.Name)
	}
	pay, ship := cfg.Sources[0], cfg.Sources[1]
	require.Equal(t, "paydemo", pay.Name)
	require.Equal(t, "payment", pay.Kind)
	require.Equal(t, "standard-webhooks", pay.Signature.Scheme)
	require.True(t, strings.HasPrefix(pay.Signature.Secrets[0], "whsec_"), "documented demo secret")
	require.Equal(t, "shipdemo", ship.Name)
	require.Equal(t, "hmac-sha256", ship.Signature.Scheme)
	require.Equal(t, "X-Signature", ship.Signature.Header)
	require.Equal(t, "hex", ship.Signature.Encoding)
	require.Equal(t, "callgate", cfg.AMQP.Prefix)
	require.Equal(t, ":8080", cfg.HTTP.Addr)
}

func TestDefaultsAndExpansion(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	cfg, err := config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	require.Equal(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", cfg.Sources[0].Signature.Secrets[0], "${VAR:-default}")
	require.Equal(t, "s3cret", cfg.Sources[1].Signature.Secrets[0], "${VAR}")
	s := cfg.Sources[1]
	require.EqualValues(t, 1<<20, s.MaxBodyBytes)
	require.Equal(t, 8, s.Retry.MaxAttempts)
	require.Equal(t, 5*time.Second, s.Retry.Initial)
	require.Equal(t, 10*time.Minute, s.Retry.Max)
	require.Equal(t, ":", s.EventID.Separator)
	require.Equal(t, "callgate", cfg.AMQP.Prefix)
	require.Equal(t, "classic", cfg.AMQP.QueueType)
	require.Equal(t, ":8080", cfg.HTTP.Addr)
	require.Equal(t, 2, cfg.Worker.Kind("payment").Concurrency)
	require.Equal(t, 2*64, cfg.Worker.Kind("payment").Prefetch, "enough for every slot to gather a full batch")
}

func TestEnvironmentOverrides(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	t.Setenv("CALLGATE_MYSQL_DSN", "u:p@tcp(db:3306)/cg")
	t.Setenv("CALLGATE_AMQP_URL", "amqp://x:y@mq:5672/")
	t.Setenv("CALLGATE_AMQP_PREFIX", "staging")
	t.Setenv("CALLGATE_HTTP_ADDR", "127.0.0.1:9999")
	t.Setenv("CALLGATE_ADMIN_TOKEN", "ops:tok")
	cfg, err := config.Parse([]byte("mysql: {dsn: from-file}\n"+valid), kinds)
	require.NoError(t, err)
	require.Equal(t, "u:p@tcp(db:3306)/cg", cfg.MySQL.DSN)
	require.Equal(t, "amqp://x:y@mq:5672/", cfg.AMQP.URL)
	require.Equal(t, "staging", cfg.AMQP.Prefix)
	require.Equal(t, "127.0.0.1:9999", cfg.HTTP.Addr)
	require.Equal(t, "ops:tok", cfg.Admin.Token)
}

// TestClusterAndDurabilityFromTheEnvironment: CALLGATE_AMQP_URLS lists a
// cluster's nodes (replacing the file's url), CALLGATE_MYSQL_DURABILITY
// chooses what a 200 means; the defaults are one node and primary.
func TestClusterAndDurabilityFromTheEnvironment(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	cfg, err := config.Parse([]byte("amqp: {url: 'amqp://g:g@one:5672/'}\n"+valid), kinds)
	require.NoError(t, err)
	require.Equal(t, []string{"amqp://g:g@one:5672/"}, cfg.AMQP.Nodes())
	require.Equal(t, "primary", cfg.MySQL.Durability)

	t.Setenv("CALLGATE_AMQP_URLS", " amqp://g:g@a:5672/, amqp://g:g@b:5672/,amqp://g:g@c:5672/ ,")
	t.Setenv("CALLGATE_MYSQL_DURABILITY", "replica")
	cfg, err = config.Parse([]byte("amqp: {url: 'amqp://g:g@one:5672/'}\n"+valid), kinds)
	require.NoError(t, err)
	require.Equal(t, []string{"amqp://g:g@a:5672/", "amqp://g:g@b:5672/", "amqp://g:g@c:5672/"}, cfg.AMQP.Nodes())
	require.Empty(t, cfg.AMQP.URL)
	require.Equal(t, "replica", cfg.MySQL.Durability)

	// The file's urls, replaced by CALLGATE_AMQP_URL.
	t.Setenv("CALLGATE_AMQP_URLS", "")
	t.Setenv("CALLGATE_AMQP_URL", "amqp://g:g@solo:5672/")
	cfg, err = config.Parse([]byte("amqp: {urls: ['amqp://g:g@a:5672/', 'amqp://g:g@b:5672/']}\n"+valid), kinds)
	require.NoError(t, err)
	require.Equal(t, []string{"amqp://g:g@solo:5672/"}, cfg.AMQP.Nodes())
}

func TestExpansionCannotInjectYAML(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "x\nsources: []\n#z")
	cfg, err := config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	require.Len(t, cfg.Sources, 2)
	require.Equal(t, "x\nsources: []\n#z", cfg.Sources[1].Signature.Secrets[0])
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	cases := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"unknown kind", func(s string) string { return strings.Replace(s, "kind: logistics", "kind: freight", 1) },
			[]string{`sources[1] (shipdemo).kind: unknown kind "freight"`}},
		{"unknown scheme", func(s string) string { return strings.Replace(s, "scheme: hmac-sha256", "scheme: md5", 1) },
			[]string{"sources[1] (shipdemo).signature.scheme", "md5"}},
		{"missing secret (unset env var)", func(s string) string { return strings.Replace(s, "${T_SHIP_SECRET}", "${T_UNSET_SECRET}", 1) },
			[]string{"sources[1] (shipdemo).signature.secrets"}},
		{"bad whsec", func(s string) string {
			return strings.Replace(s, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!", 1)
		},
			[]string{"sources[0] (paydemo).signature.secrets"}},
		{"duplicate source name", func(s string) string { return strings.Replace(s, "name: shipdemo", "name: paydemo", 1) },
			[]string{`sources[1] (paydemo).name: duplicate source name "paydemo"`}},
		{"missing business key", func(s string) string { return strings.Replace(s, "business_key: waybillNo", "", 1) },
			[]string{"sources[1] (shipdemo).business_key"}},
		{"missing event id", func(s string) string { return strings.Replace(s, "event_id: {fields: [waybillNo, seq]}", "", 1) },
			[]string{"sources[1] (shipdemo).event_id.fields"}},
		{"event id from a header the signature does not cover", func(s string) string {
			return strings.Replace(s, "event_id: {fields: [waybillNo, seq]}", "event_id: {header: X-GitHub-Delivery}", 1)
		},
			[]string{"sources[1] (shipdemo).event_id.header: X-GitHub-Delivery is not covered by the hmac-sha256 signature", "event_id.body_digest: true"}},
		{"body digest beside fields", func(s string) string {
			return strings.Replace(s, "event_id: {fields: [waybillNo, seq]}", "event_id: {fields: [waybillNo], body_digest: true}", 1)
		},
			[]string{"sources[1] (shipdemo).event_id.body_digest: does not go with"}},
		{"typo in a key", func(s string) string {
			return strings.Replace(s, "business_key: waybillNo", "bizness_key: waybillNo", 1)
		},
			[]string{"bizness_key"}},
		{"bad queue type", func(s string) string { return "amqp: {queue_type: mirrored}\n" + s },
			[]string{"amqp.queue_type"}},
		{"url and urls", func(s string) string { return "amqp: {url: 'amqp://a/', urls: ['amqp://b/']}\n" + s },
			[]string{"amqp.url, urls: set one of them"}},
		{"a url that is not one", func(s string) string { return "amqp: {urls: ['amqp://a/', 'http://b/']}\n" + s },
			[]string{"amqp.urls[1]"}},
		{"bad durability", func(s string) string { return "mysql: {durability: quorum}\n" + s },
			[]string{`mysql.durability: want primary or replica, got "quorum"`}},
		{"unbounded unrouted queue", func(s string) string { return "amqp: {unrouted_max_length: -1}\n" + s },
			[]string{"amqp.unrouted_max_length"}},
		{"none without allow_unsigned", func(s string) string { return strings.Replace(s, "scheme: hmac-sha256", "scheme: none", 1) },
			[]string{"sources[1] (shipdemo).signature"}},
		{"several problems at once", func(s string) string {
			s = strings.Replace(s, "kind: logistics", "kind: freight", 1)
			return strings.Replace(s, "scheme: standard-webhooks", "scheme: md5", 1)
		}, []string{"sources[1] (shipdemo).kind", "sources[0] (paydemo).signature.scheme"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.edit(valid)), kinds)
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"), kinds)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestPathFromEnv(t *testing.T) {
	t.Setenv(config.EnvConfigPath, "")
	require.Equal(t, config.DefaultPath, config.PathFromEnv())
	t.Setenv(config.EnvConfigPath, "/etc/callgate.yaml")
	require.Equal(t, "/etc/callgate.yaml", config.PathFromEnv())
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte("sources: [{name: a, kind: payment}]"))
	f.Add([]byte("{{{"))
	f.Add([]byte("sources: ${X:-"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := config.Parse(raw, kinds)
		if err == nil {
			require.NotEmpty(t, cfg.Sources)
		}
	})
}

func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "ship.secret")
	require.NoError(t, os.WriteFile(f, []byte("from-a-file\n"), 0o600))
	t.Setenv("T_SHIP_SECRET", "")
	t.Setenv("T_SHIP_SECRET_FILE", f)
	cfg, err := config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	require.Equal(t, "from-a-file", cfg.Sources[1].Signature.Secrets[0], "VAR_FILE is read when VAR is unset")
}

func TestHardeningOptionsValidated(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	extra := `
    rate_limit: {rate: 100}
    allow_ips: ["10.0.0.0/8", "192.0.2.7"]
    content_types: ["application/json"]
`
	cfg, err := config.Parse([]byte(strings.Replace(valid, "    business_key: waybillNo\n", "    business_key: waybillNo\n"+extra[1:], 1)), kinds)
	require.NoError(t, err)
	s := cfg.Sources[1]
	require.Equal(t, 100, s.RateLimit.Burst, "burst defaults to the rate")
	require.Equal(t, []string{"10.0.0.0/8", "192.0.2.7"}, s.AllowIPs)

	bad := strings.Replace(valid, "    business_key: waybillNo\n", "    business_key: waybillNo\n    allow_ips: [\"10.0.0.0/33\"]\n    content_types: [\"not a type\"]\n", 1)
	_, err = config.Parse([]byte(bad), kinds)
	require.ErrorContains(t, err, "sources[1] (shipdemo).allow_ips[0]")
	require.ErrorContains(t, err, "sources[1] (shipdemo).content_types[0]")
}

// TestSecureCookieDefaultsToTrue: admin.secure_cookie is true when absent
// (browsers accept Secure cookies from http://localhost) and an explicit
// false still works.
func TestSecureCookieDefaultsToTrue(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	cfg, err := config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	require.True(t, cfg.Admin.SecureCookie, "absent: true")
	cfg, err = config.Parse([]byte("admin: {secure_cookie: false}\n"+valid), kinds)
	require.NoError(t, err)
	require.False(t, cfg.Admin.SecureCookie, "explicit false")
	cfg, err = config.Parse([]byte("admin: {secure_cookie: true}\n"+valid), kinds)
	require.NoError(t, err)
	require.True(t, cfg.Admin.SecureCookie, "explicit true")
	shipped, err := config.Load(filepath.Join("..", "..", "configs", "callgate.yaml"), kinds)
	require.NoError(t, err)
	require.True(t, shipped.Admin.SecureCookie, "the shipped file")
}

// TestAdminAddr: http.admin_addr is off by default, read when set, and
// checked to be a host:port other than http.addr.
func TestAdminAddr(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	cfg, err := config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	require.Empty(t, cfg.HTTP.AdminAddr, "off by default")
	cfg, err = config.Parse([]byte("http: {admin_addr: \"127.0.0.1:9091\"}\n"+valid), kinds)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9091", cfg.HTTP.AdminAddr)
	cfg, err = config.Parse([]byte("http: {addr: \"127.0.0.1:0\", admin_addr: \"127.0.0.1:0\"}\n"+valid), kinds)
	require.NoError(t, err, "two free ports do not clash")
	require.Equal(t, "127.0.0.1:0", cfg.HTTP.AdminAddr)

	for raw, want := range map[string]string{
		`http: {admin_addr: "9091"}`:                 "http.admin_addr: want host:port",
		`http: {addr: ":8080", admin_addr: ":8080"}`: "http.admin_addr: must differ from http.addr",
		`http: {admin_addr: "127.0.0.1:9091:1"}`:     "http.admin_addr: want host:port",
	} {
		_, err := config.Parse([]byte(raw+"\n"+valid), kinds)
		require.ErrorContains(t, err, want, raw)
	}
}

// TestTimeoutsShorterThanTheirBounds: a timeout that must end before
// another is read, and one at or past that other is refused, naming both:
//   - mysql.lock_wait_timeout before worker.handler_timeout (else a lock
//     wait ends as a failed attempt instead of contention);
//   - mysql.intake_timeout before http.write_timeout (else the store's
//     503 cannot be written and the platform sees a closed connection: a
//     test that gave the store 15 s beside the 15 s default got EOFs on a
//     loaded machine).
func TestTimeoutsShorterThanTheirBounds(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	for _, tc := range []struct {
		name, ok string
		read     func(config.Config) time.Duration
		want     time.Duration
		refused  map[string]string // YAML: the error it gives
	}{
		{"lock wait", "mysql: {lock_wait_timeout: 5s}\n", func(c config.Config) time.Duration { return c.MySQL.LockWaitTimeout }, 5 * time.Second,
			map[string]string{
				"mysql: {lock_wait_timeout: 30s}\n":                                "mysql.lock_wait_timeout: 30s must be shorter than worker.handler_timeout (30s)",
				"mysql: {lock_wait_timeout: 10s}\nworker: {handler_timeout: 5s}\n": "mysql.lock_wait_timeout: 10s must be shorter than worker.handler_timeout (5s)",
			}},
		{"intake", "mysql: {intake_timeout: 10s}\n", func(c config.Config) time.Duration { return c.MySQL.IntakeTimeout }, 10 * time.Second,
			map[string]string{
				"mysql: {intake_timeout: 15s}\n":                           "mysql.intake_timeout: 15s must be shorter than http.write_timeout (15s)",
				"mysql: {intake_timeout: 3s}\nhttp: {write_timeout: 2s}\n": "mysql.intake_timeout: 3s must be shorter than http.write_timeout (2s)",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.ok+valid), kinds)
			require.NoError(t, err)
			require.Equal(t, tc.want, tc.read(*cfg))
			for doc, want := range tc.refused {
				_, err = config.Parse([]byte(doc+valid), kinds)
				require.ErrorContains(t, err, want)
			}
		})
	}
}

// TestOIDCFromTheEnvironment: every admin.oidc setting the issue names
// comes from its environment variable (the secret also from a _FILE), the
// lists are comma-separated, and the defaults are filled.
func TestOIDCFromTheEnvironment(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	secret := filepath.Join(t.TempDir(), "oidc-secret")
	require.NoError(t, os.WriteFile(secret, []byte("from-a-file-0123\n"), 0o600))
	t.Setenv("CALLGATE_OIDC_ISSUER", "https://login.example.com/realms/corp")
	t.Setenv("CALLGATE_OIDC_CLIENT_ID", "callgate")
	t.Setenv("CALLGATE_OIDC_CLIENT_SECRET_FILE", secret)
	t.Setenv("CALLGATE_OIDC_REDIRECT_URL", "https://callgate.example.com/admin/oidc/callback")
	t.Setenv("CALLGATE_OIDC_OPERATORS", "sre, payments-oncall")
	t.Setenv("CALLGATE_OIDC_VIEWERS", "support,")
	cfg, err := config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	o := cfg.Admin.OIDC
	require.Equal(t, "https://login.example.com/realms/corp", o.Issuer)
	require.Equal(t, "callgate", o.ClientID)
	require.Equal(t, "from-a-file-0123", o.ClientSecret)
	require.Equal(t, "https://callgate.example.com/admin/oidc/callback", o.RedirectURL)
	require.Equal(t, []string{"sre", "payments-oncall"}, o.Operators)
	require.Equal(t, []string{"support"}, o.Viewers)

	t.Setenv("CALLGATE_OIDC_CLIENT_SECRET", "from-the-env-0123")
	cfg, err = config.Parse([]byte("admin: {oidc: {roles_claim: roles, max_session: 1h, only: true}}\n"+valid), kinds)
	require.NoError(t, err)
	require.Equal(t, "from-the-env-0123", cfg.Admin.OIDC.ClientSecret, "the variable wins over its _FILE")
	require.Equal(t, "roles", cfg.Admin.OIDC.RolesClaim)
	require.Equal(t, time.Hour, cfg.Admin.OIDC.MaxSession)
	require.True(t, cfg.Admin.OIDC.Only)

	t.Setenv("CALLGATE_OIDC_CLIENT_SECRET", "")
	t.Setenv("CALLGATE_OIDC_CLIENT_SECRET_FILE", filepath.Join(t.TempDir(), "missing"))
	_, err = config.Parse([]byte(valid), kinds)
	require.ErrorContains(t, err, "CALLGATE_OIDC_CLIENT_SECRET_FILE")
}

// TestOIDCValidated: each wrong admin.oidc setting is named.
func TestOIDCValidated(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	for yaml, want := range map[string]string{
		`{client_id: x}`: "admin.oidc.issuer: required",
		`{issuer: "http://idp.example.com", client_id: c, client_secret: s3cret-0123456789ab, redirect_url: "https://cg.example.com/admin/oidc/callback", operators: [o]}`:                  "admin.oidc.issuer: want https",
		`{issuer: "https://idp.example.com", client_secret: s3cret-0123456789ab, redirect_url: "https://cg.example.com/admin/oidc/callback", operators: [o]}`:                               "admin.oidc.client_id: required",
		`{issuer: "https://idp.example.com", client_id: c, redirect_url: "https://cg.example.com/admin/oidc/callback", operators: [o]}`:                                                     "admin.oidc.client_secret: required",
		`{issuer: "https://idp.example.com", client_id: c, client_secret: s3cret-0123456789ab, redirect_url: "https://cg.example.com/callback", operators: [o]}`:                            "admin.oidc.redirect_url: its path must be /admin/oidc/callback",
		`{issuer: "https://idp.example.com", client_id: c, client_secret: s3cret-0123456789ab, redirect_url: "https://cg.example.com/admin/oidc/callback"}`:                                 "admin.oidc.operators: list the claim values",
		`{issuer: "https://idp.example.com", client_id: c, client_secret: s3cret-0123456789ab, redirect_url: "https://cg.example.com/admin/oidc/callback", viewers: [v], max_session: 10s}`: "admin.oidc.max_session",
		`{issuer: "https://idp.example.com", client_id: c, client_secret: s3cret-0123456789ab, redirect_url: "https://cg.example.com/admin/oidc/callback", viewers: [v], scopes: [email]}`:  "admin.oidc.scopes: must include openid",
	} {
		_, err := config.Parse([]byte("admin: {oidc: "+yaml+"}\n"+valid), kinds)
		require.ErrorContains(t, err, want, yaml)
	}
	cfg, err := config.Parse([]byte(`admin: {oidc: {issuer: "http://127.0.0.1:5556/dex", client_id: c, client_secret: s3cret-0123456789ab, redirect_url: "http://localhost:8080/admin/oidc/callback", viewers: [v]}}`+"\n"+valid), kinds)
	require.NoError(t, err, "plain http to a loopback provider and console (development)")
	require.Equal(t, "http://127.0.0.1:5556/dex", cfg.Admin.OIDC.Issuer)
}

// TestMetricsPublicOffUnlessAsked: the shipped file keeps the gateway's
// /metrics off its public listener; CALLGATE_METRICS_PUBLIC=1 serves it.
func TestMetricsPublicOffUnlessAsked(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "callgate.yaml")
	cfg, err := config.Load(path, kinds)
	require.NoError(t, err)
	require.False(t, cfg.Metrics.Public)
	t.Setenv("CALLGATE_METRICS_PUBLIC", "1")
	cfg, err = config.Load(path, kinds)
	require.NoError(t, err)
	require.True(t, cfg.Metrics.Public)
}

// TestReconcileSettings: the shipped file's reconciliation settings, the
// environment's durations over them, and a value that is not a duration
// refused, naming the variable.
func TestReconcileSettings(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "callgate.yaml")
	cfg, err := config.Load(path, kinds)
	require.NoError(t, err)
	rc := cfg.Scheduler.Reconcile
	require.Equal(t, 10*time.Minute, rc.After)
	require.Equal(t, time.Minute, rc.Interval)
	require.Equal(t, 48*time.Hour, rc.GiveUp)
	require.Equal(t, []time.Duration{10 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 24 * time.Hour}, rc.Backoff)
	require.EqualValues(t, 10, rc.Rate)
	bases := map[string]string{}
	for _, s := range cfg.Sources {
		if s.Reconcile.APIBase != "" {
			bases[s.Name] = s.Reconcile.APIBase
			require.False(t, s.Reconcile.Configured(), "%s: not asked until its credentials are set", s.Name)
		}
		if s.Name == "kuaidi100" {
			require.Equal(t, 24*time.Hour, s.Reconcile.SilentFor)
		}
	}
	require.Equal(t, "https://api.mch.weixin.qq.com", bases["wechatpay"])
	require.Equal(t, "https://openapi.alipay.com/gateway.do", bases["alipay"])
	require.Equal(t, "https://poll.kuaidi100.com", bases["kuaidi100"])

	t.Setenv("ALIPAY_APP_PRIVATE_KEY_FILE", "/etc/callgate/alipay_app_key.pem")
	t.Setenv("ALIPAY_GATEWAY_URL", "https://openapi-sandbox.dl.alipaydev.com/gateway.do")
	t.Setenv("KUAIDI100_CUSTOMER", "C1")
	t.Setenv("KUAIDI100_KEY", "K1")
	t.Setenv("KUAIDI100_SILENT_FOR", "6h")
	cfg, err = config.Load(path, kinds)
	require.NoError(t, err)
	for _, s := range cfg.Sources {
		switch s.Name {
		case "alipay":
			require.Equal(t, "/etc/callgate/alipay_app_key.pem", s.Reconcile.PrivateKeyFile)
			require.Equal(t, "https://openapi-sandbox.dl.alipaydev.com/gateway.do", s.Reconcile.APIBase)
		case "kuaidi100":
			require.Equal(t, "C1", s.Reconcile.Customer)
			require.Equal(t, "K1", s.Reconcile.APIKey)
			require.Equal(t, 6*time.Hour, s.Reconcile.SilentFor)
		}
	}

	t.Setenv("CALLGATE_RECONCILE_AFTER", "30m")
	t.Setenv("CALLGATE_RECONCILE_INTERVAL", "15s")
	cfg, err = config.Load(path, kinds)
	require.NoError(t, err)
	require.Equal(t, 30*time.Minute, cfg.Scheduler.Reconcile.After)
	require.Equal(t, 15*time.Second, cfg.Scheduler.Reconcile.Interval)

	t.Setenv("CALLGATE_RECONCILE_AFTER", "ten minutes")
	_, err = config.Load(path, kinds)
	require.ErrorContains(t, err, "CALLGATE_RECONCILE_AFTER")
}

// TestDemoAdminToken: demo mode with no admin token and no single sign-on
// opens the admin side with the published demo token; a configured token
// or single sign-on keeps it off; outside demo mode a setting that holds
// it stops the start, naming the setting.
func TestDemoAdminToken(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	t.Setenv("CALLGATE_ADMIN_TOKEN", "")
	t.Setenv("CALLGATE_DEMO", "")
	parse := func(extra string) (*config.Config, error) { return config.Parse([]byte(extra+valid), kinds) }

	cfg, err := parse("")
	require.NoError(t, err)
	require.Empty(t, cfg.Admin.Token, "not in demo mode: the admin side stays off")

	cfg, err = parse("demo: true\n")
	require.NoError(t, err)
	require.Equal(t, demo.AdminToken, cfg.Admin.Token)
	tokens, err := admin.ParseTokens(cfg.Admin.Token)
	require.NoError(t, err)
	who, err := tokens.Authenticate(demo.AdminToken)
	require.NoError(t, err)
	require.Equal(t, admin.RoleOperator, who.Role)

	cfg, err = parse("demo: true\nadmin: {token: 'me:my-own-secret-1'}\n")
	require.NoError(t, err)
	require.Equal(t, "me:my-own-secret-1", cfg.Admin.Token, "a configured token replaces the demo one")

	t.Setenv("CALLGATE_DEMO", "1")
	cfg, err = parse("admin: {oidc: {issuer: 'https://idp.example', client_id: c, client_secret: a-secret-of-16-chars, redirect_url: 'https://cg.example/admin/oidc/callback', operators: [ops]}}\n")
	require.NoError(t, err)
	require.Empty(t, cfg.Admin.Token, "single sign-on configured: no demo token beside it")

	t.Setenv("CALLGATE_DEMO", "")
	_, err = parse("admin: {token: '" + demo.AdminToken + "'}\n")
	require.ErrorContains(t, err, "line 1: admin.token: holds the published demo admin token, which works only in demo mode (CALLGATE_DEMO=1)")
	t.Setenv("CALLGATE_ADMIN_TOKEN", "ops:a-real-token-1,"+demo.AdminToken)
	_, err = parse("")
	require.ErrorContains(t, err, "CALLGATE_ADMIN_TOKEN: admin.token: holds the published demo admin token")
}
