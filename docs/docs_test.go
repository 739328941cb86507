package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// root is the repository, one up from this package.
const root = ".."

// modulePath is go.mod's module, so that callgate/internal/x is root/internal/x.
const modulePath = "callgate"

// tableHeading is the heading of docs/configuration.md's one table.
const tableHeading = "## Every setting and environment variable"

// dynamicReads are the os.Getenv / os.LookupEnv calls whose name is not a
// constant, each with where its names come from: the test reads those
// places itself. A new call of that kind fails the test until it is
// listed here and its names are found.
var dynamicReads = map[string]string{
	"internal/config/load.go:Parse":    "envOverrides and envDurations, read below",
	"internal/config/expand.go:Expand": "the ${VAR} references of configs/callgate.yaml, read below",
	"internal/config/origin.go:Origin": "envOverrides again (where a setting came from), read below",
}

func TestConfigurationTableListsEveryEnvironmentVariable(t *testing.T) {
	listed := tableVariables(t, filepath.Join(root, "docs", "configuration.md"))
	if len(listed) < 20 {
		t.Fatalf("docs/configuration.md: found %d variables in the table under %q: is the heading or the table's shape changed?", len(listed), tableHeading)
	}

	// What the code reads: it must all be in the table.
	must := map[string]string{} // name -> where it is read
	goReads(t, []string{"cmd", "internal"}, false, must)
	loadTables(t, must)
	yamlVars := configVariables(t)
	for _, v := range yamlVars {
		if _, ok := must[v]; !ok {
			must[v] = "configs/callgate.yaml"
		}
	}
	for _, name := range sortedKeys(must) {
		if !listed[name] {
			t.Errorf("%s reads %s, which docs/configuration.md's table does not list", must[name], name)
		}
	}

	// What the table may list besides: the _FILE form of a ${VAR}, and
	// what tests, scripts and the Makefile read.
	may := map[string]string{}
	for k, v := range must {
		may[k] = v
	}
	for _, v := range yamlVars {
		may[v+"_FILE"] = "configs/callgate.yaml (VAR_FILE)"
	}
	goReads(t, []string{"cmd", "internal", "test", "scripts"}, true, may)
	shellReads(t, may)
	for _, name := range sortedKeys(listed) {
		if _, ok := may[name]; !ok {
			t.Errorf("docs/configuration.md's table lists %s, which nothing reads (not the code, its tests, scripts/ or the Makefile)", name)
		}
	}
}

// tableVariables returns the environment variables (the `UPPER_CASE`
// names) of the second column of the table under tableHeading.
func tableVariables(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == tableHeading {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("%s: no heading %q", path, tableHeading)
	}
	name := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	out := map[string]bool{}
	inTable := false
	for _, l := range lines[start+1:] {
		if strings.HasPrefix(l, "#") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break // the table ended
			}
			continue
		}
		inTable = true
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[2], -1) {
			out[m[1]] = true
		}
	}
	return out
}

// goReads adds to out the environment variables the Go files under dirs
// read: os.Getenv and os.LookupEnv of a string constant (a literal, a
// constant, a concatenation of those), and calls of a function that
// passes one of its parameters to them (envOr(EnvURL, ...)). tests chooses
// the _test.go files instead of the others. A read of anything else
// must be one of dynamicReads.
func goReads(t *testing.T, dirs []string, tests bool, out map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	type file struct {
		rel string
		f   *ast.File
	}
	byDir := map[string][]file{}
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") != tests {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			byDir[filepath.ToSlash(filepath.Dir(rel))] = append(byDir[filepath.ToSlash(filepath.Dir(rel))], file{rel, f})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The string constants of every package, by its directory (non-test
	// files, whichever files are read: tests use their package's constants).
	consts := map[string]map[string]string{}
	constsOf := func(dir string) map[string]string {
		if c, ok := consts[dir]; ok {
			return c
		}
		c := map[string]string{}
		consts[dir] = c
		entries, _ := os.ReadDir(filepath.Join(root, dir))
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, dir, e.Name()), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								c[n.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
		return c
	}
	for dir, files := range byDir {
		for _, fl := range files {
			imports := map[string]string{} // name -> directory
			for _, im := range fl.f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if !strings.HasPrefix(p, modulePath+"/") {
					continue
				}
				name := p[strings.LastIndex(p, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				imports[name] = strings.TrimPrefix(p, modulePath+"/")
			}
			var str func(e ast.Expr) (string, bool)
			str = func(e ast.Expr) (string, bool) {
				switch e := e.(type) {
				case *ast.BasicLit:
					if e.Kind == token.STRING {
						s, err := strconv.Unquote(e.Value)
						return s, err == nil
					}
				case *ast.Ident:
					s, ok := constsOf(dir)[e.Name]
					return s, ok
				case *ast.SelectorExpr:
					if x, ok := e.X.(*ast.Ident); ok {
						if d, ok := imports[x.Name]; ok {
							s, ok := constsOf(d)[e.Sel.Name]
							return s, ok
						}
					}
				case *ast.BinaryExpr:
					if e.Op == token.ADD {
						a, ok1 := str(e.X)
						b, ok2 := str(e.Y)
						return a + b, ok1 && ok2
					}
				case *ast.ParenExpr:
					return str(e.X)
				}
				return "", false
			}
			isEnvCall := func(c *ast.CallExpr) bool {
				sel, ok := c.Fun.(*ast.SelectorExpr)
				if !ok || len(c.Args) == 0 {
					return false
				}
				x, ok := sel.X.(*ast.Ident)
				return ok && x.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv")
			}
			// paramRead tells whether e is param (or param + "suffix"),
			// and the suffix.
			paramRead := func(e ast.Expr, params map[string]int) (int, string, bool) {
				switch e := e.(type) {
				case *ast.Ident:
					if i, ok := params[e.Name]; ok {
						return i, "", true
					}
				case *ast.BinaryExpr:
					if id, ok := e.X.(*ast.Ident); ok && e.Op == token.ADD {
						if i, ok := params[id.Name]; ok {
							if s, ok := str(e.Y); ok {
								return i, s, true
							}
						}
					}
				}
				return 0, "", false
			}
			type wrapper struct {
				param  int
				suffix string
			}
			wrappers := map[string][]wrapper{}
			covered := map[*ast.CallExpr]bool{} // env calls on a wrapper's parameter
			funcName := map[*ast.CallExpr]string{}
			visitFunc := func(name string, ft *ast.FuncType, body *ast.BlockStmt) {
				params := map[string]int{}
				i := 0
				for _, f := range ft.Params.List {
					for _, n := range f.Names {
						params[n.Name] = i
						i++
					}
					if len(f.Names) == 0 {
						i++
					}
				}
				ast.Inspect(body, func(n ast.Node) bool {
					c, ok := n.(*ast.CallExpr)
					if !ok || !isEnvCall(c) {
						return true
					}
					if _, ok := funcName[c]; !ok {
						funcName[c] = name
					}
					if idx, suffix, ok := paramRead(c.Args[0], params); ok && name != "" {
						wrappers[name] = append(wrappers[name], wrapper{idx, suffix})
						covered[c] = true
					}
					return true
				})
			}
			ast.Inspect(fl.f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					if n.Body != nil {
						visitFunc(n.Name.Name, n.Type, n.Body)
					}
				case *ast.AssignStmt:
					for i, r := range n.Rhs {
						if fl2, ok := r.(*ast.FuncLit); ok && i < len(n.Lhs) {
							if id, ok := n.Lhs[i].(*ast.Ident); ok {
								visitFunc(id.Name, fl2.Type, fl2.Body)
							}
						}
					}
				}
				return true
			})
			enclosing := map[*ast.CallExpr]string{}
			for _, d := range fl.f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					ast.Inspect(fd.Body, func(n ast.Node) bool {
						if c, ok := n.(*ast.CallExpr); ok {
							enclosing[c] = fd.Name.Name
						}
						return true
					})
				}
			}
			ast.Inspect(fl.f, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				pos := fset.Position(c.Pos())
				where := fl.rel + ":" + strconv.Itoa(pos.Line)
				if isEnvCall(c) {
					if s, ok := str(c.Args[0]); ok {
						if _, seen := out[s]; !seen {
							out[s] = where
						}
					} else if !covered[c] && !tests {
						key := fl.rel + ":" + enclosing[c]
						if _, ok := dynamicReads[key]; !ok {
							t.Errorf("%s: an environment variable read whose name the test cannot tell (%s): read it by a constant name, or list it in dynamicReads with where its names come from", where, key)
						}
					}
					return true
				}
				id, ok := c.Fun.(*ast.Ident)
				if !ok {
					return true
				}
				for _, w := range wrappers[id.Name] {
					if w.param < len(c.Args) {
						if s, ok := str(c.Args[w.param]); ok {
							if _, seen := out[s+w.suffix]; !seen {
								out[s+w.suffix] = where
							}
						}
					}
				}
				return true
			})
		}
	}
}

// loadTables adds internal/config/load.go's envOverrides and envDurations:
// each entry's first field is the variable, and an override whose last
// field is true also reads VAR_FILE.
func loadTables(t *testing.T, out map[string]string) {
	t.Helper()
	path := filepath.Join(root, "internal", "config", "load.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
							consts[n.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	found := map[string]int{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if (n.Name != "envOverrides" && n.Name != "envDurations") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					t.Fatalf("%s: %s is not a composite literal", path, n.Name)
				}
				for _, e := range lit.Elts {
					el, ok := e.(*ast.CompositeLit)
					if !ok || len(el.Elts) == 0 {
						t.Fatalf("%s: an entry of %s is not {env, ...}", path, n.Name)
					}
					var env string
					switch v := el.Elts[0].(type) {
					case *ast.BasicLit:
						env, _ = strconv.Unquote(v.Value)
					case *ast.Ident:
						env = consts[v.Name]
					}
					if env == "" {
						t.Fatalf("%s: an entry of %s names its variable in a way the test cannot read", path, n.Name)
					}
					out[env] = "internal/config/load.go (" + n.Name + ")"
					found[n.Name]++
					if last, ok := el.Elts[len(el.Elts)-1].(*ast.Ident); ok && last.Name == "true" && n.Name == "envOverrides" {
						out[env+"_FILE"] = "internal/config/load.go (envOverrides, file)"
					}
				}
			}
		}
	}
	if found["envOverrides"] == 0 || found["envDurations"] == 0 {
		t.Fatalf("%s: envOverrides or envDurations not found (%v)", path, found)
	}
}

// configVariables are the VAR of every ${VAR} and ${VAR:-default} in
// configs/callgate.yaml's values (its comments are not read).
func configVariables(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "configs", "callgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)
	seen := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode {
			for _, m := range ref.FindAllStringSubmatch(n.Value, -1) {
				seen[m[1]] = true
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	if len(seen) == 0 {
		t.Fatal("configs/callgate.yaml: no ${VAR} found")
	}
	return sortedKeys(seen)
}

// shellReads adds the variables the scripts, CI and the Makefile read:
// $NAME and ${NAME...} in scripts/*.sh and .ci/*, $(NAME), ${NAME},
// $${NAME} and NAME ?= in the Makefile.
func shellReads(t *testing.T, out map[string]string) {
	t.Helper()
	sh := regexp.MustCompile(`\$\{?([A-Z][A-Z0-9_]*)`)
	var files []string
	for _, g := range []string{"scripts/*.sh", ".ci/*"} {
		m, _ := filepath.Glob(filepath.Join(root, g))
		files = append(files, m...)
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		for _, m := range sh.FindAllStringSubmatch(string(raw), -1) {
			if _, ok := out[m[1]]; !ok {
				out[m[1]] = filepath.ToSlash(rel)
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mk := regexp.MustCompile(`\$\(([A-Z][A-Z0-9_]*)\)|\$\$?\{([A-Z][A-Z0-9_]*)|(?m)^([A-Z][A-Z0-9_]*) *\?=`)
	for _, m := range mk.FindAllStringSubmatch(string(raw), -1) {
		for _, g := range m[1:] {
			if _, ok := out[g]; g != "" && !ok {
				out[g] = "Makefile"
			}
		}
	}
}

func TestLinksLeadSomewhere(t *testing.T) {
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d Markdown files found", len(files))
	}
	anchors := map[string]map[string]bool{} // file -> its headings' anchors
	anchorsOf := func(p string) map[string]bool {
		if a, ok := anchors[p]; ok {
			return a
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(raw))
		anchors[p] = a
		return a
	}
	link := regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	checked := 0
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		for i, line := range proseLines(string(raw)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := filepath.ToSlash(rel) + ":" + strconv.Itoa(i+1)
				file, anchor, _ := strings.Cut(target, "#")
				dest := p
				if file != "" {
					dest = filepath.Join(filepath.Dir(p), filepath.FromSlash(file))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s: link %q: no file %s", where, target, file)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %q: an anchor into a file that is not Markdown", where, target)
					continue
				}
				if !anchorsOf(dest)[anchor] {
					t.Errorf("%s: link %q: no heading with the anchor #%s in %s", where, target, anchor, file)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: is the link pattern broken?", checked)
	}
}

// proseLines are the file's lines with fenced code blocks blanked and
// inline code removed (a link inside code is not a link), so that line
// numbers stay.
func proseLines(s string) []string {
	lines := strings.Split(s, "\n")
	code := regexp.MustCompile("`[^`]*`")
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			lines[i] = ""
			continue
		}
		if fence {
			lines[i] = ""
			continue
		}
		lines[i] = code.ReplaceAllString(l, "")
	}
	return lines
}

// headingAnchors are the anchors GitHub gives a file's headings: the
// heading's text lower-cased, punctuation dropped (letters, digits,
// spaces, '-' and '_' kept), spaces made '-', and a repeated anchor
// suffixed -1, -2, ...
func headingAnchors(s string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	fence := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		hashes := len(l) - len(strings.TrimLeft(l, "#"))
		if hashes == 0 || hashes > 6 || len(l) == hashes || l[hashes] != ' ' {
			continue
		}
		a := Slug(l[hashes+1:])
		if n := count[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		count[a]++
	}
	return out
}

// Slug is GitHub's anchor for a heading's text.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimRight(heading, "# "))) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"A payment callback is FAILED at 3 a.m.":                "a-payment-callback-is-failed-at-3-am",
		"A payment's life: the rule table":                      "a-payments-life-the-rule-table",
		"What a 200 means: `mysql.durability`":                  "what-a-200-means-mysqldurability",
		"Upgrading to roles and single sign-on (migration 014)": "upgrading-to-roles-and-single-sign-on-migration-014",
		"WeChat Pay API v3":                                     "wechat-pay-api-v3",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
