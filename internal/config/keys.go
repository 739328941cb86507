package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// checkKeys walks the file's node tree (which keeps the lines as written)
// against the yaml tags of t, the type the tree is decoded into, and
// reports every key no field takes and every value of the wrong shape,
// each with its line and its YAML path (worker.batch_size,
// sources[3].platform.secrets). The keys of a map are free-form; only
// their values are checked. orig holds, for each scalar ${VAR} expanded,
// the text as written, which is what a message shows.
func checkKeys(doc *yaml.Node, t reflect.Type, orig map[*yaml.Node]string) []error {
	k := keyChecker{orig: orig, seen: map[aliased]bool{}}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		k.walk(doc.Content[0], t, "", 0)
	}
	return k.errs
}

type keyChecker struct {
	orig map[*yaml.Node]string
	errs []error
	// seen are the anchored nodes already checked as a type: an anchor's
	// node is checked once however many aliases name it, so a file of
	// aliases of aliases ("billion laughs") costs its size, not its
	// expansion.
	seen map[aliased]bool
}

type aliased struct {
	node *yaml.Node
	t    reflect.Type
}

// once reports whether the anchor behind alias n is still to be checked
// as t, and marks it.
func (k *keyChecker) once(n *yaml.Node, t reflect.Type) bool {
	key := aliased{n.Alias, t}
	if k.seen[key] {
		return false
	}
	k.seen[key] = true
	return true
}

func (k *keyChecker) fail(n *yaml.Node, path, format string, args ...any) {
	if path == "" {
		path = "(top level)"
	}
	k.errs = append(k.errs, &lineError{line: n.Line, msg: path + ": " + fmt.Sprintf(format, args...)})
}

var (
	durationType    = reflect.TypeOf(time.Duration(0))
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	textType        = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

func (k *keyChecker) walk(n *yaml.Node, t reflect.Type, path string, depth int) {
	if depth > maxExpandedDepth {
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		if k.once(n, t) {
			k.walk(n.Alias, t, path, depth+1)
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // leaves the field as it is
	}
	if custom(t) {
		k.scalar(n, t, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			k.fail(n, path, "want %s, got %s", expected(t), k.got(n, path))
			return
		}
		k.structMapping(n, t, path, depth)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			k.fail(n, path, "want %s, got %s", expected(t), k.got(n, path))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			k.walk(val, t.Elem(), join(path, key.Value), depth+1)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			k.fail(n, path, "want %s, got %s", expected(t), k.got(n, path))
			return
		}
		for i, item := range n.Content {
			k.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
	case reflect.Interface:
		// anything goes
	default:
		k.scalar(n, t, path)
	}
}

// custom reports whether t decodes itself (or is a duration), so that its
// node is checked by decoding it rather than by its shape.
func custom(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t == durationType || p.Implements(unmarshalerType) || p.Implements(textType)
}

// scalar checks n by decoding it into a fresh t, as the real decode will.
func (k *keyChecker) scalar(n *yaml.Node, t reflect.Type, path string) {
	if err := n.Decode(reflect.New(t).Interface()); err == nil {
		return
	}
	hint := ""
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		plain := *n
		plain.Style, plain.Tag = 0, ""
		if plain.Decode(reflect.New(t).Interface()) == nil {
			hint = " (without the quotes)"
		}
	} else if t == durationType && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		hint = " (a number needs a unit: " + n.Value + "s)"
	}
	k.fail(n, path, "want %s, got %s%s", expected(t), k.got(n, path), hint)
}

// structMapping checks the keys of mapping n against keys, following
// YAML merge keys (<<: *anchor) into the same struct.
func (k *keyChecker) structMapping(n *yaml.Node, t reflect.Type, path string, depth int) {
	keys := structKeys(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge" {
			k.merge(val, t, path, depth+1)
			continue
		}
		if ft, ok := keys.fields[key.Value]; ok {
			k.walk(val, ft, join(path, key.Value), depth+1)
			continue
		}
		if keys.rest != nil { // an inline map takes every other key
			k.walk(val, keys.rest, join(path, key.Value), depth+1)
			continue
		}
		msg := "unknown key"
		if s := suggest(key.Value, keys.order); s != "" {
			msg += "; did you mean " + s + "?"
		}
		k.fail(key, join(path, key.Value), "%s", msg)
	}
}

func (k *keyChecker) merge(n *yaml.Node, t reflect.Type, path string, depth int) {
	if depth > maxExpandedDepth {
		return
	}
	switch {
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		if k.once(n, t) {
			k.merge(n.Alias, t, path, depth+1)
		}
	case n.Kind == yaml.MappingNode:
		k.structMapping(n, t, path, depth)
	case n.Kind == yaml.SequenceNode:
		for _, m := range n.Content {
			k.merge(m, t, path, depth+1)
		}
	}
}

// fieldKeys are the keys a struct takes, as go.yaml.in/yaml/v3 maps them.
type fieldKeys struct {
	fields map[string]reflect.Type
	order  []string     // as declared, for suggestions
	rest   reflect.Type // value type of an inline map, if any
}

// structKeys lists t's keys: the yaml tag's name, else the field's name in
// lower case; unexported and "-" fields are left out, ,inline structs
// (and pointers to them) add their keys, an ,inline map takes the rest.
func structKeys(t reflect.Type) fieldKeys {
	keys := fieldKeys{fields: map[string]reflect.Type{}}
	var add func(t reflect.Type, depth int)
	add = func(t reflect.Type, depth int) {
		for i := 0; i < t.NumField() && depth < maxExpandedDepth; i++ {
			f := t.Field(i)
			if f.PkgPath != "" && !f.Anonymous {
				continue
			}
			tag := f.Tag.Get("yaml")
			if tag == "" && !strings.Contains(string(f.Tag), ":") {
				tag = string(f.Tag)
			}
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if inline(opts) {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				switch ft.Kind() {
				case reflect.Struct:
					add(ft, depth+1)
				case reflect.Map:
					keys.rest = ft.Elem()
				}
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			if _, dup := keys.fields[name]; !dup {
				keys.order = append(keys.order, name)
			}
			keys.fields[name] = f.Type
		}
	}
	add(t, 0)
	return keys
}

func inline(opts string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == "inline" {
			return true
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expected says in words what a value of type t looks like.
func expected(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		return "a duration like 30s, 5m or 1h30m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Struct {
			return "a list of mappings"
		}
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping (key: value lines)"
	}
	return "a value"
}

// secretish are words of a key whose value a message must not repeat.
var secretish = []string{"secret", "token", "password", "dsn", "key", "salt", "url", "cert"}

// got says in words what n is; a scalar is shown as written in the file
// (${VAR}, not its value), unless its key may hold a secret.
func (k *keyChecker) got(n *yaml.Node, path string) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (*" + n.Value + ")"
	}
	last := strings.ToLower(path[strings.LastIndex(path, ".")+1:])
	for _, w := range secretish {
		if strings.Contains(last, w) {
			return "a " + kindOfScalar(n)
		}
	}
	v, ok := k.orig[n]
	if !ok {
		v = n.Value
	}
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	return fmt.Sprintf("%q", v)
}

func kindOfScalar(n *yaml.Node) string {
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "number"
	case "!!bool":
		return "boolean"
	}
	return "string"
}

// suggest returns the known key closest to key, if one is close: the same
// letters without underscores or case, or at most two edits apart (one
// for a short key).
func suggest(key string, known []string) string {
	squash := func(s string) string {
		return strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(s, "_", ""), "-", ""))
	}
	for _, c := range known {
		if squash(c) == squash(key) {
			return c
		}
	}
	limit := min(2, max(1, len(key)/3))
	best, bestD := "", limit+1
	for _, c := range known {
		if d := editDistance(strings.ToLower(key), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
