package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
)

// withComments puts the comments a real file has above valid, so that a
// line reported from a re-encoded tree (which drops them) would be wrong.
func withComments(head string) string {
	return "# callgate\n#\n# comments the decoder does not keep\n\n" + head + valid
}

// lineOf returns the 1-based line of the first line of s containing sub.
func lineOf(t *testing.T, s, sub string) int {
	t.Helper()
	for i, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return i + 1
		}
	}
	t.Fatalf("%q not in the file", sub)
	return 0
}

func TestKeyErrorsGiveLineAndPath(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	cases := []struct {
		name, head, edit, with, at string // at: text of the line reported
		want                       string
	}{
		{"unknown key, suggested", "worker:\n  # the batch\n  batchsize: 10\n", "", "", "batchsize",
			"worker.batchsize: unknown key; did you mean batch_size?"},
		{"no suggestion when nothing is close", "worker:\n  flux_capacitor: 10\n", "", "", "flux_capacitor",
			"worker.flux_capacitor: unknown key"},
		{"in a list item", "", "header: X-Signature", "headr: X-Signature", "headr",
			"sources[1].signature.headr: unknown key; did you mean header?"},
		{"same letters without the underscore", "", "business_key: waybillNo", "businesskey: waybillNo", "businesskey",
			"sources[1].businesskey: unknown key; did you mean business_key?"},
		{"in a map's value", "worker:\n  kinds:\n    payment: {concurency: 2}\n", "", "", "concurency",
			"worker.kinds.payment.concurency: unknown key; did you mean concurrency?"},
		{"an inline struct's keys", "admin:\n  replay_capp: 10\n", "", "", "replay_capp",
			"admin.replay_capp: unknown key; did you mean replay_cap?"},
		{"a string for a number", "worker:\n  batch_size: \"ten\"\n", "", "", "batch_size",
			`worker.batch_size: want a whole number, got "ten"`},
		{"a quoted number", "worker:\n  batch_size: '10'\n", "", "", "batch_size",
			`worker.batch_size: want a whole number, got "10" (without the quotes)`},
		{"a duration without its unit", "worker:\n  handler_timeout: 30\n", "", "", "handler_timeout",
			`worker.handler_timeout: want a duration like 30s, 5m or 1h30m, got "30" (a number needs a unit: 30s)`},
		{"a scalar for a list", "admin:\n  trusted_proxies: 10.0.0.1\n", "", "", "trusted_proxies",
			`admin.trusted_proxies: want a list, got "10.0.0.1"`},
		{"a list for a mapping", "worker: [1, 2]\n", "", "", "worker:",
			"worker: want a mapping (key: value lines), got a list"},
		{"a bool", "demo: maybe\n", "", "", "demo:",
			`demo: want true or false, got "maybe"`},
		{"an expanded value is shown as written", "worker:\n  batch_size: ${T_NOT_A_NUMBER:-lots}\n", "", "", "batch_size",
			`worker.batch_size: want a whole number, got "${T_NOT_A_NUMBER:-lots}"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := withComments(tc.head)
			if tc.edit != "" {
				file = strings.Replace(file, tc.edit, tc.with, 1)
			}
			_, err := config.Parse([]byte(file), kinds)
			require.Error(t, err)
			want := "line " + strconv.Itoa(lineOf(t, file, tc.at)) + ": " + tc.want
			require.Contains(t, strings.Split(err.Error(), "\n"), want, "all: %v", err)
			require.NotContains(t, err.Error(), "config.", "no Go type names")
			require.NotContains(t, err.Error(), "worker.Config")
		})
	}
}

// TestKeysAcceptEverythingTheDecoderTakes: anchors, merge keys, flow
// style, free-form map keys and nulls pass the key check.
func TestKeysAcceptEverythingTheDecoderTakes(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	head := `
retry: &retry {max_attempts: 3, initial: 1s}
`
	// An unknown top-level key is refused even as an anchor's holder.
	_, err := config.Parse([]byte(head+valid), kinds)
	require.ErrorContains(t, err, "line 2: retry: unknown key")

	file := strings.Replace(valid, "    business_key: waybillNo\n", "    business_key: waybillNo\n    retry: {<<: {max_attempts: 3}, initial: 1s}\n", 1)
	file = "log: ~\nworker:\n  kinds:\n    payment: {concurrency: 3}\n" + file
	cfg, err := config.Parse([]byte(file), kinds)
	require.NoError(t, err)
	require.Equal(t, 3, cfg.Sources[1].Retry.MaxAttempts)
	require.Equal(t, 3, cfg.Worker.Kind("payment").Concurrency)

	bad := strings.Replace(file, "{<<: {max_attempts: 3}", "{<<: {max_atempts: 3}", 1)
	_, err = config.Parse([]byte(bad), kinds)
	require.ErrorContains(t, err, "sources[1].retry.max_atempts: unknown key; did you mean max_attempts?")
}

// TestValidationErrorsGiveTheLine: what Validate finds is reported at the
// setting's line, or at its section's when the setting is left out.
func TestValidationErrorsGiveTheLine(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	file := withComments("mysql:\n  durability: quorum\n")
	file = strings.Replace(file, "kind: logistics", "kind: freight", 1)
	file = strings.Replace(file, "    business_key: waybillNo\n", "", 1)
	_, err := config.Parse([]byte(file), kinds)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Contains(t, lines, "line "+strconv.Itoa(lineOf(t, file, "durability"))+`: mysql.durability: want primary or replica, got "quorum"`)
	require.Contains(t, err.Error(), "line "+strconv.Itoa(lineOf(t, file, "kind: freight"))+`: sources[1] (shipdemo).kind: unknown kind "freight"`)
	require.Contains(t, err.Error(), "line "+strconv.Itoa(lineOf(t, file, "- name: shipdemo"))+": sources[1] (shipdemo).business_key")
}

// TestMalformedDSNBlamesItsSource: a DSN the driver cannot read is the
// environment variable's fault when it came from CALLGATE_MYSQL_DSN (and
// then not the file's), mysql.dsn's at its line when from the file.
func TestMalformedDSNBlamesItsSource(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	path := filepath.Join(t.TempDir(), "callgate.yaml")
	file := withComments("mysql:\n  dsn: \"root@tcp(db:3306)callgate\"\n")
	require.NoError(t, os.WriteFile(path, []byte(file), 0o600))

	_, err := config.Load(path, kinds)
	require.EqualError(t, err, path+": line "+strconv.Itoa(lineOf(t, file, "dsn:"))+": mysql.dsn: invalid DSN: missing the slash separating the database name")

	t.Setenv("CALLGATE_MYSQL_DSN", "root:pw@tcp(db:3306)nodb")
	_, err = config.Load(path, kinds)
	require.EqualError(t, err, "CALLGATE_MYSQL_DSN: mysql.dsn: invalid DSN: missing the slash separating the database name")
	require.NotContains(t, err.Error(), "pw")

	t.Setenv("CALLGATE_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/cg")
	_, err = config.Load(path, kinds)
	require.NoError(t, err, "the variable wins over the file's bad value")
}

// TestWrongTypeDoesNotRepeatASecret: a secret's value is not shown.
func TestWrongTypeDoesNotRepeatASecret(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "hunter2-the-secret")
	file := strings.Replace(valid, `secrets: ["${T_SHIP_SECRET}"]`, `secrets: {a: b}`, 1)
	file = "mysql: {dsn: [root-pw-hunter2]}\n" + file
	_, err := config.Parse([]byte(file), kinds)
	require.ErrorContains(t, err, "line "+strconv.Itoa(lineOf(t, file, "secrets: {a: b}"))+": sources[1].signature.secrets: want a list, got a mapping")
	require.ErrorContains(t, err, "line 1: mysql.dsn: want a string, got a list")
	require.NotContains(t, err.Error(), "hunter2")
}

// TestAliasesCostTheirSize: aliases of aliases are checked once each, not
// once per expansion (and the decoder refuses the expansion).
func TestAliasesCostTheirSize(t *testing.T) {
	var b strings.Builder
	b.WriteString("worker:\n  kinds:\n    l0: &l0 {concurrency: 1}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&b, "    l%d: &l%d {<<: [*l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d]}\n", i, i, i-1)
	}
	start := time.Now()
	_, err := config.Parse([]byte(b.String()), kinds)
	require.ErrorContains(t, err, "excessive aliasing")
	// Milliseconds when each alias is checked once; once per expansion
	// would be 9^11 checks, years: a bound with a loaded machine's margin.
	require.Less(t, time.Since(start), 30*time.Second)
}
