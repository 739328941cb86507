package broker

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Config configures the RabbitMQ connection, the topology's names and the
// announcer: the file's amqp section.
type Config struct {
	// URL of the broker. Env CALLGATE_AMQP_URL. Default URLDefault.
	URL string `yaml:"url"`
	// Prefix of every exchange and queue name. Env CALLGATE_AMQP_PREFIX.
	// Default "callgate".
	Prefix string `yaml:"prefix"`
	// QueueType is "classic" (default) or "quorum" (for a RabbitMQ
	// cluster; choose it before the queues first exist).
	QueueType string `yaml:"queue_type"`
	// AnnounceBuffer is how many announcements may wait for the broker
	// before the intake stops queueing them (the rows stay PENDING and the
	// compensation job announces them). Default 10000.
	AnnounceBuffer int `yaml:"announce_buffer"`
	// ConfirmWindow is how many publishes may await their confirm at once.
	// Default 256.
	ConfirmWindow int `yaml:"confirm_window"`
	// ReconnectMin and ReconnectMax bound the redial backoff (x1.5 per
	// try, forever). Defaults 500ms and 30s.
	ReconnectMin time.Duration `yaml:"reconnect_min"`
	ReconnectMax time.Duration `yaml:"reconnect_max"`
}

// Queue types.
const (
	QueueTypeClassic = "classic"
	QueueTypeQuorum  = "quorum"
)

// Config defaults.
const (
	URLDefault            = "amqp://guest:guest@127.0.0.1:5672/"
	PrefixDefault         = "callgate"
	QueueTypeDefault      = QueueTypeClassic
	AnnounceBufferDefault = 10000
	ConfirmWindowDefault  = 256
	ReconnectMinDefault   = 500 * time.Millisecond
	ReconnectMaxDefault   = 30 * time.Second
)

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.URL == "" {
		c.URL = URLDefault
	}
	if c.Prefix == "" {
		c.Prefix = PrefixDefault
	}
	if c.QueueType == "" {
		c.QueueType = QueueTypeDefault
	}
	if c.AnnounceBuffer == 0 {
		c.AnnounceBuffer = AnnounceBufferDefault
	}
	if c.ConfirmWindow == 0 {
		c.ConfirmWindow = ConfirmWindowDefault
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = ReconnectMinDefault
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = max(ReconnectMaxDefault, c.ReconnectMin)
	}
	return c
}

// Validate reports every problem at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.QueueType != QueueTypeClassic && c.QueueType != QueueTypeQuorum {
		errs = append(errs, fmt.Errorf("queue_type: want classic or quorum, got %q", c.QueueType))
	}
	if !validName(c.Prefix) {
		errs = append(errs, fmt.Errorf("prefix: %q: use letters, digits, '-', '_' and '.'", c.Prefix))
	}
	if c.AnnounceBuffer < 0 {
		errs = append(errs, errors.New("announce_buffer: must not be negative"))
	}
	if c.ConfirmWindow < 1 {
		errs = append(errs, errors.New("confirm_window: must be at least 1"))
	}
	if c.ReconnectMin <= 0 || c.ReconnectMax < c.ReconnectMin {
		errs = append(errs, errors.New("reconnect_min, reconnect_max: want 0 < reconnect_min <= reconnect_max"))
	}
	return errors.Join(errs...)
}

func validName(s string) bool { return namePattern.MatchString(s) }

var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
