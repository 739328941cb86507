package config_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
)

// TestSyntaxErrorAtItsLineAndColumn: a YAML mistake deep in the file is
// reported where the parser stopped, line and column, not at the line
// where the enclosing block began (a key mis-indented at line 129 of the
// shipped file was reported at line 4, the top-level mapping's first key).
func TestSyntaxErrorAtItsLineAndColumn(t *testing.T) {
	t.Parallel()
	shipped, err := os.ReadFile(filepath.Join("..", "..", "configs", "callgate.yaml"))
	require.NoError(t, err)
	const key = "  metrics_addr: "
	require.Equal(t, 1, strings.Count(string(shipped), "\n"+key), "one worker.metrics_addr in the shipped file")
	line := lineOf(t, string(shipped), key)
	require.Greater(t, line, 100, "deep in the file")

	for _, c := range []struct {
		name, indent string
		column       int
		want         string
	}{
		// One space less than its section's keys: outside worker, inside
		// nothing else.
		{"indented too little", " ", 2, "not valid YAML: value is not allowed in this context"},
		// A tab where YAML wants spaces.
		{"a tab", "\t", 1, "not valid YAML: found character '\t' that cannot start any token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := strings.Replace(string(shipped), "\n"+key, "\n"+c.indent+strings.TrimLeft(key, " "), 1)
			path := filepath.Join(t.TempDir(), "callgate.yaml")
			require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
			_, err := config.Load(path, kinds)
			require.Error(t, err)
			require.Equal(t, path+": line "+strconv.Itoa(line)+", column "+strconv.Itoa(c.column)+": "+c.want, err.Error())
		})
	}

	// A mistake on the first line the parser reads, with no enclosing
	// block to blame.
	_, err = config.Parse([]byte("http: addr: ':8080'\n"), kinds)
	require.EqualError(t, err, "line 1, column 7: not valid YAML: mapping value is not allowed in this context")
}
