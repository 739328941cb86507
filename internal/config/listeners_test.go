package config_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/worker"
)

// TestEveryListenerHasAVariable: every address a process listens on (a
// setting named addr or *_addr) can be moved from the environment, by
// CALLGATE_ and its path in capitals (http.admin_addr:
// CALLGATE_HTTP_ADMIN_ADDR), without editing the file: a port taken on
// this machine (9090 is Prometheus's own) must not need an edit. The
// variable wins over the file and is blamed for what it set. A new
// listener setting fails here until it has its variable.
func TestEveryListenerHasAVariable(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	listeners := addrSettings(reflect.TypeOf(config.Config{}), "")
	require.Subset(t, listeners, []string{"http.addr", "http.admin_addr", "http.pprof_addr", "worker.metrics_addr", "worker.pprof_addr"})
	// The file gives each another address, which the variable beats
	// (every listener is one level down: http.*, worker.*).
	sections := map[string][]string{}
	for _, s := range listeners {
		section, key, ok := strings.Cut(s, ".")
		require.True(t, ok && !strings.Contains(key, "."), "%s: the test writes section.key only", s)
		sections[section] = append(sections[section], key)
	}
	var file strings.Builder
	for section, keys := range sections {
		file.WriteString(section + ":\n")
		for _, key := range keys {
			fmt.Fprintf(&file, "  %s: '127.0.0.1:1'\n", key)
		}
	}
	want := map[string]string{}
	for i, s := range listeners {
		env := "CALLGATE_" + strings.ToUpper(strings.ReplaceAll(s, ".", "_"))
		want[s] = fmt.Sprintf("127.0.0.1:%d", 20000+i)
		t.Setenv(env, want[s])
	}
	cfg, err := config.Parse([]byte(file.String()+valid), kinds)
	require.NoError(t, err)
	for _, s := range listeners {
		env := "CALLGATE_" + strings.ToUpper(strings.ReplaceAll(s, ".", "_"))
		require.Equal(t, want[s], settingValue(t, cfg, s), "%s set by %s", s, env)
		require.Equal(t, env, config.Origin("no-such-file.yaml", s), "%s blamed on %s", s, env)
	}
	// The names the processes give when the address is in use.
	require.Equal(t, "CALLGATE_HTTP_ADDR", config.EnvHTTPAddr)
	require.Equal(t, "CALLGATE_HTTP_ADMIN_ADDR", config.EnvHTTPAdminAddr)
	require.Equal(t, "CALLGATE_HTTP_PPROF_ADDR", config.EnvHTTPPprofAddr)
	require.Equal(t, "CALLGATE_WORKER_METRICS_ADDR", worker.MetricsAddrEnv)
	require.Equal(t, "CALLGATE_WORKER_PPROF_ADDR", worker.PprofAddrEnv)
}

// addrSettings are the YAML paths of the string settings named addr or
// *_addr in t's structs (not in lists or maps: a process has one of
// each).
func addrSettings(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		path := prefix
		if opts != "inline" {
			if name == "" || name == "-" {
				continue
			}
			path = strings.TrimPrefix(prefix+"."+name, ".")
		}
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, addrSettings(f.Type, path)...)
		case f.Type.Kind() == reflect.String && (name == "addr" || strings.HasSuffix(name, "_addr")):
			out = append(out, path)
		}
	}
	return out
}

// settingValue is the string at the YAML path in cfg.
func settingValue(t *testing.T, cfg *config.Config, path string) string {
	t.Helper()
	v := reflect.ValueOf(*cfg)
	for _, key := range strings.Split(path, ".") {
		found := false
		for i := range v.NumField() {
			if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); name == key {
				v, found = v.Field(i), true
				break
			}
		}
		require.True(t, found, "%s: no field %s", path, key)
	}
	return v.String()
}
