package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"callgate/internal/source"
)

// DeadLetters is the file's dead_letters section: how many notifications
// each source may store that are signed and ours but that its preset
// cannot read (dead letters: callback.Unreadable, FAILED by the worker
// without a handler), per hour and per gateway process. Declared here
// beside http, since only the gateway's intake (an HTTP package the worker
// must not link) reads it.
//
// Such a notification is kept rather than refused so that nothing signed
// is lost, but nothing else bounds it: one captured delivery re-sent in
// ways that make new rows would grow callback_log by up to a body each
// time. Past the limit the intake answers 429 with Retry-After and stores
// nothing: the platform resends later, so a genuine one is still stored
// while the platform retries.
type DeadLetters struct {
	// MaxPerHour is how many new dead letters a source stores per hour;
	// 0: no limit. The file's default is DeadLettersMaxPerHourDefault.
	MaxPerHour int `yaml:"max_per_hour"`
	// MaxBytesPerHour is how many bytes of body those dead letters store
	// per hour (each row keeps the whole body); 0: no limit. The file's
	// default is DeadLettersMaxBytesPerHourDefault. At least the source's
	// max_body_bytes, or a large one could never be stored.
	MaxBytesPerHour int64 `yaml:"max_bytes_per_hour"`
	// Sources overrides either limit for a source, by name; a limit left
	// out is the section's.
	Sources map[string]DeadLetterLimit `yaml:"sources"`
}

// DeadLetterLimit is one source's dead_letters.sources entry.
type DeadLetterLimit struct {
	MaxPerHour      *int   `yaml:"max_per_hour"`
	MaxBytesPerHour *int64 `yaml:"max_bytes_per_hour"`
}

// Dead-letter defaults: a source that stores more than a hundred
// notifications an hour that it cannot read has a configuration to fix,
// and ten of the largest bodies (1 MiB each by default) an hour are what
// one source may add to the table meanwhile.
const (
	DeadLettersMaxPerHourDefault      = 100
	DeadLettersMaxBytesPerHourDefault = 10 << 20
)

// For returns source name's limits: its override, else the section's.
func (d DeadLetters) For(name string) (maxPerHour int, maxBytesPerHour int64) {
	maxPerHour, maxBytesPerHour = d.MaxPerHour, d.MaxBytesPerHour
	if o, ok := d.Sources[name]; ok {
		if o.MaxPerHour != nil {
			maxPerHour = *o.MaxPerHour
		}
		if o.MaxBytesPerHour != nil {
			maxBytesPerHour = *o.MaxBytesPerHour
		}
	}
	return maxPerHour, maxBytesPerHour
}

// validate checks the limits against the sources (with their defaults).
func (d DeadLetters) validate(sources []source.Config) error {
	var errs []error
	limits := func(field string, n int, b int64) {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%smax_per_hour: must not be negative (0: no limit), got %d", field, n))
		}
		if b < 0 {
			errs = append(errs, fmt.Errorf("%smax_bytes_per_hour: must not be negative (0: no limit), got %d", field, b))
		}
	}
	limits("", d.MaxPerHour, d.MaxBytesPerHour)
	byName := map[string]source.Config{}
	for _, s := range sources {
		byName[s.Name] = s
	}
	names := make([]string, 0, len(d.Sources))
	for name := range d.Sources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		field := "sources." + name + "."
		o := d.Sources[name]
		n, b := d.For(name)
		if o.MaxPerHour != nil || o.MaxBytesPerHour != nil {
			limits(field, n, b)
		}
		s, ok := byName[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("sources.%s: no source of that name (sources: %s)", name, strings.Join(deadLetterSourceNames(sources), ", ")))
		case s.Preset == "":
			// A configured source's body is checked at intake (JSON shape,
			// keys, event id, business key) and read by its handler: the
			// intake stores no dead letters for it, and a limit would
			// promise a bound it does not set.
			errs = append(errs, fmt.Errorf("sources.%s: not a preset source: only a preset stores notifications it cannot read", name))
		}
	}
	// Checked for every preset source that serves (one without its keys
	// stores nothing), with the section's limit or its own: a body the
	// source accepts must fit in an hour's bytes, or a dead letter that
	// large would be refused for as long as the platform resends it.
	for _, s := range sources {
		if _, b := d.For(s.Name); s.Preset != "" && !s.Disabled() && b > 0 && b < s.MaxBodyBytes {
			field := "max_bytes_per_hour"
			if o, ok := d.Sources[s.Name]; ok && o.MaxBytesPerHour != nil {
				field = "sources." + s.Name + ".max_bytes_per_hour"
			}
			errs = append(errs, fmt.Errorf("%s: %d is less than the max_body_bytes (%d) of source %s: a dead letter that large could never be stored", field, b, s.MaxBodyBytes, s.Name))
		}
	}
	return errors.Join(errs...)
}

func deadLetterSourceNames(sources []source.Config) []string {
	names := make([]string, 0, len(sources))
	for _, s := range sources {
		names = append(names, s.Name)
	}
	return names
}
