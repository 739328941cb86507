package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	goccy "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
	"go.yaml.in/yaml/v3"
)

// A problem found in the file reads "line N: path: what is wrong" (Load
// puts the file's name before it); one in a value that came from the
// environment reads "CALLGATE_X: path: what is wrong", without the file,
// since editing the file would not fix it.

// lineError is a problem at a line of the file.
type lineError struct {
	line int // 1-based; 0 when the setting is not in the file
	// column is 1-based, 0 when unknown (a setting's problem is its line's).
	column int
	msg    string
}

func (e *lineError) Error() string {
	switch {
	case e.line <= 0:
		return e.msg
	case e.column > 0:
		return fmt.Sprintf("line %d, column %d: %s", e.line, e.column, e.msg)
	}
	return fmt.Sprintf("line %d: %s", e.line, e.msg)
}

// envError is a problem in a value taken from an environment variable.
type envError struct {
	env string
	err error
}

func (e *envError) Error() string { return e.env + ": " + e.err.Error() }
func (e *envError) Unwrap() error { return e.err }

// leaves flattens errors.Join trees.
func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// blame puts on each of Validate's errors ("path: message") where the
// setting came from: the environment variable that set it (fromEnv maps
// a YAML path to one), else its line in the file, the line of the
// closest enclosing key that is in the file, or none.
func blame(err error, doc *yaml.Node, fromEnv map[string]string) error {
	var out []error
	for _, e := range leaves(err) {
		msg := e.Error()
		path, _, ok := strings.Cut(msg, ": ")
		if !ok {
			out = append(out, e)
			continue
		}
		path = sourceNames.ReplaceAllString(path, "")
		if env := envFor(path, fromEnv); env != "" {
			out = append(out, &envError{env: env, err: e})
			continue
		}
		out = append(out, &lineError{line: lineOf(doc, path), msg: msg})
	}
	return errors.Join(out...)
}

// sourceNames are the " (name)" that Validate puts after sources[i].
var sourceNames = regexp.MustCompile(` \([^()]*\)`)

// envFor returns the variable that set path or a setting enclosing it.
func envFor(path string, fromEnv map[string]string) string {
	for p, env := range fromEnv {
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return env
		}
	}
	return ""
}

// lineOf returns the line of the deepest part of path (a.b[2].c) found
// in the document, 0 when not even its first key is there.
func lineOf(doc *yaml.Node, path string) int {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return 0
	}
	n, line := doc.Content[0], 0
	for _, seg := range strings.Split(path, ".") {
		key, idx, _ := strings.Cut(seg, "[")
		if n = child(n, key); n == nil {
			return line
		}
		line = n.Line
		for idx != "" {
			var is string
			is, idx, _ = strings.Cut(idx, "]")
			idx = strings.TrimPrefix(idx, "[")
			i, err := strconv.Atoi(is)
			if n.Kind == yaml.AliasNode && n.Alias != nil {
				n = n.Alias
			}
			if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		}
	}
	return line
}

// child is the value of key in mapping n (nil if absent); its Line is
// that of the key when the value is a block on the following lines.
func child(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := *n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				v.Line = n.Content[i].Line
			}
			return &v
		}
	}
	return nil
}

// yamlError turns a syntax error of the file into a lineError at the
// line and column where the parsing stopped. yaml.v3 names only the line
// where the enclosing block began ("line 4: did not find expected key"
// for a key mis-indented at line 129: the top-level mapping's first key),
// so the file is parsed again by goccy/go-yaml, whose errors carry the
// token they stopped at; when it finds no error of its own, yaml.v3's
// line and words are kept.
func yamlError(raw []byte, err error) error {
	_, perr := goccyparser.ParseBytes(raw, 0)
	var at goccy.Error
	if errors.As(perr, &at) && at.GetToken() != nil && at.GetToken().Position != nil {
		pos := at.GetToken().Position
		return &lineError{line: pos.Line, column: pos.Column, msg: "not valid YAML: " + at.GetMessage()}
	}
	rest, ok := strings.CutPrefix(err.Error(), "yaml: line ")
	if n, msg, found := strings.Cut(rest, ": "); ok && found {
		if line, err := strconv.Atoi(n); err == nil {
			return &lineError{line: line, msg: "not valid YAML: " + msg}
		}
	}
	return fmt.Errorf("not valid YAML: %w", err)
}

// inFile puts the file's name before each problem that is the file's.
func inFile(path string, err error) error {
	var out []error
	for _, e := range leaves(err) {
		var env *envError
		if errors.As(e, &env) {
			out = append(out, e)
		} else {
			out = append(out, fmt.Errorf("%s: %w", path, e))
		}
	}
	return errors.Join(out...)
}
