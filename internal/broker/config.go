package broker

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Config configures the RabbitMQ connection, the topology's names and the
// announcer: the file's amqp section.
type Config struct {
	// URL of the broker. Env CALLGATE_AMQP_URL. Default URLDefault.
	URL string `yaml:"url"`
	// URLs lists the nodes of a RabbitMQ cluster; every connection dials
	// them in turn, from a shuffled start, and redials the next when one
	// dies. Env CALLGATE_AMQP_URLS (comma-separated). Set url or urls, not
	// both (an environment variable replaces whichever the file set).
	URLs []string `yaml:"urls"`
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
	// UnroutedMaxLength and UnroutedMaxBytes bound the unrouted queue
	// (x-max-length, x-max-length-bytes; overflow drop-head: the oldest
	// parked notification goes, and stays in the outbox table until
	// retention). Defaults 100000 and 256 MiB.
	UnroutedMaxLength int   `yaml:"unrouted_max_length"`
	UnroutedMaxBytes  int64 `yaml:"unrouted_max_bytes"`
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
	// UnroutedMaxLengthDefault and UnroutedMaxBytesDefault keep a
	// forgotten parking lot far below a broker's disk and memory alarms
	// (a benchmark with no subscriber parked 403,608 notifications).
	UnroutedMaxLengthDefault       = 100_000
	UnroutedMaxBytesDefault  int64 = 256 << 20
)

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.URL == "" && len(c.URLs) == 0 {
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
	if c.UnroutedMaxLength == 0 {
		c.UnroutedMaxLength = UnroutedMaxLengthDefault
	}
	if c.UnroutedMaxBytes == 0 {
		c.UnroutedMaxBytes = UnroutedMaxBytesDefault
	}
	return c
}

// Nodes are the broker URLs to dial: urls, or the one url.
func (c Config) Nodes() []string {
	if len(c.URLs) > 0 {
		return c.URLs
	}
	if c.URL == "" {
		return []string{URLDefault}
	}
	return []string{c.URL}
}

// NodeName is a broker URL without its credentials, for logs and
// readiness answers: host:port/vhost.
func NodeName(url string) string {
	u, err := amqp.ParseURI(url)
	if err != nil {
		return "(unparsable url)"
	}
	return fmt.Sprintf("%s:%d/%s", u.Host, u.Port, strings.TrimPrefix(u.Vhost, "/"))
}

// Validate reports every problem at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.URL != "" && len(c.URLs) > 0 {
		errs = append(errs, errors.New("url, urls: set one of them (urls for a cluster), not both"))
	}
	for i, u := range c.Nodes() {
		if _, err := amqp.ParseURI(u); err != nil {
			errs = append(errs, fmt.Errorf("urls[%d]: %w", i, err))
		}
	}
	if c.UnroutedMaxLength < 1 {
		errs = append(errs, errors.New("unrouted_max_length: must be at least 1"))
	}
	if c.UnroutedMaxBytes < 1 {
		errs = append(errs, errors.New("unrouted_max_bytes: must be at least 1"))
	}
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
