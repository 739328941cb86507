package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestEachOverrideIsOnItsSettingsRow: the variable that overrides a
// setting (internal/config/load.go's envOverrides and envDurations) is
// named on that setting's row of docs/configuration.md's table, not only
// somewhere in it: whoever looks up http.admin_addr learns there that
// CALLGATE_HTTP_ADMIN_ADDR moves it.
func TestEachOverrideIsOnItsSettingsRow(t *testing.T) {
	rows := tableRows(t, filepath.Join(root, "docs", "configuration.md"))
	for env, setting := range overrides(t) {
		vars, ok := rows[setting]
		if !ok {
			t.Errorf("docs/configuration.md's table has no row for %s (overridden by %s)", setting, env)
			continue
		}
		if !vars[env] {
			t.Errorf("docs/configuration.md: the row of %s does not name %s, which overrides it", setting, env)
		}
	}
}

// tableRows maps each setting of the table under tableHeading (the
// `a.b` names of a row's first cell) to the variables of its second.
func tableRows(t *testing.T, path string) map[string]map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), tableHeading+"\n")
	if !ok {
		t.Fatalf("%s: no heading %q", path, tableHeading)
	}
	setting := regexp.MustCompile("`([a-z][a-z0-9_.]*)`")
	variable := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	out := map[string]map[string]bool{}
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "#") {
			break
		}
		cells := strings.Split(l, "|")
		if !strings.HasPrefix(l, "|") || len(cells) < 4 {
			continue
		}
		vars := map[string]bool{}
		for _, m := range variable.FindAllStringSubmatch(cells[2], -1) {
			vars[m[1]] = true
		}
		for _, m := range setting.FindAllStringSubmatch(cells[1], -1) {
			out[m[1]] = vars
		}
	}
	return out
}

// overrides maps each variable of load.go's envOverrides and envDurations
// to the setting it overrides (each entry is {env, path, ...}).
func overrides(t *testing.T) map[string]string {
	t.Helper()
	path := filepath.Join(root, "internal", "config", "load.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
		return true
	})
	str := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, _ := strconv.Unquote(e.Value)
			return s
		case *ast.Ident:
			return consts[e.Name]
		}
		return ""
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || (vs.Names[0].Name != "envOverrides" && vs.Names[0].Name != "envDurations") {
			return true
		}
		for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
			el := e.(*ast.CompositeLit)
			env, setting := str(el.Elts[0]), str(el.Elts[1])
			if env == "" || setting == "" {
				t.Fatalf("%s: an entry of %s names its variable or setting in a way the test cannot read", path, vs.Names[0].Name)
			}
			out[env] = setting
		}
		return false
	})
	if len(out) < 10 {
		t.Fatalf("%s: found %d overrides: is envOverrides's shape changed?", path, len(out))
	}
	return out
}
