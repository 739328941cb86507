package config

import (
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxExpandedDepth bounds the walk over a hostile file's nesting.
const maxExpandedDepth = 32

// expandNode replaces ${VAR} and ${VAR:-default} in every scalar of a
// parsed YAML tree. Expanding after parsing means a secret holding YAML
// syntax cannot change the file's structure. An expanded scalar is left
// to be typed by its new value (so max_open_conns: ${N:-64} is a number),
// except a value YAML would read as null, which stays a string. orig, if
// not nil, gets each expanded scalar's text as written.
func expandNode(n *yaml.Node, depth int, orig map[*yaml.Node]string) {
	if depth > maxExpandedDepth {
		return
	}
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		if orig != nil {
			orig[n] = n.Value
		}
		n.Value = Expand(n.Value)
		n.Style = 0
		n.Tag = ""
		switch n.Value {
		case "", "~", "null", "Null", "NULL":
			n.Tag = "!!str"
		}
	}
	for _, c := range n.Content {
		expandNode(c, depth+1, orig)
	}
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
