package config

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SettingError is an error at start caused by one setting's value (a
// DSN whose user MySQL refuses, an address already in use): its text
// begins with the setting's YAML path ("mysql.dsn: ...").
type SettingError interface {
	error
	Setting() string
}

// Origin says where the value of setting (a YAML path: mysql.dsn,
// amqp.url, http.addr) came from, as Load's errors do: "CALLGATE_X" for
// an environment variable, "FILE: line N" for the config file at path,
// "" for the default.
func Origin(path, setting string) string {
	for _, o := range envOverrides {
		if o.path != setting {
			continue
		}
		if v, ok := os.LookupEnv(o.env); ok && v != "" {
			return o.env
		}
		if f := os.Getenv(o.env + "_FILE"); o.file && f != "" {
			return o.env + "_FILE"
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var root yaml.Node
	if yaml.Unmarshal(raw, &root) != nil {
		return ""
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return ""
	}
	// Only the key itself: a default is not the file's, even when its
	// section is there.
	n := root.Content[0]
	for _, key := range strings.Split(setting, ".") {
		if n = child(n, key); n == nil {
			return ""
		}
	}
	return fmt.Sprintf("%s: line %d", path, n.Line)
}

// Blame puts before err, when it is a SettingError, where its setting's
// value came from (Origin): "CALLGATE_MYSQL_DSN: mysql.dsn: ...",
// "callgate.yaml: line 40: mysql.dsn: ...". Other errors read as they are.
func Blame(path string, err error) string {
	var se SettingError
	if !errors.As(err, &se) {
		return err.Error()
	}
	if o := Origin(path, se.Setting()); o != "" {
		return o + ": " + se.Error()
	}
	return se.Error()
}
