package replay

import "errors"

// Config bounds bulk replays: part of the file's admin section.
type Config struct {
	// Cap is the largest bulk replay allowed without confirm_large.
	// Default 10000.
	Cap int `yaml:"replay_cap"`
	// Rate is how many callbacks per second a bulk replay announces.
	// Default 200.
	Rate int `yaml:"replay_rate"`
}

// Config defaults.
const (
	CapDefault  = 10000
	RateDefault = 200
)

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Cap == 0 {
		c.Cap = CapDefault
	}
	if c.Rate == 0 {
		c.Rate = RateDefault
	}
	return c
}

// Validate reports every problem at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.Cap < 1 {
		errs = append(errs, errors.New("replay_cap: must be at least 1"))
	}
	if c.Rate < 1 {
		errs = append(errs, errors.New("replay_rate: must be at least 1"))
	}
	return errors.Join(errs...)
}
