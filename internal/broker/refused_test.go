package broker

import (
	"errors"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestRefusedNamesTheSetting: what the broker refuses for good (the
// login, the vhost, the topology's permissions) is a RefusedError naming
// the setting, the node, the user and never the password; a broker that
// is down, or a connection limit reached, is not one (it is retried).
func TestRefusedNamesTheSetting(t *testing.T) {
	const url = "amqp://callgate:s3cret-pw@mq.example:5672/prod"
	dial := func(err error) error { return fmt.Errorf("error dialing broker: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want string // "" when not a refusal
	}{
		{"credentials", dial(amqp.ErrCredentials),
			`amqp.urls: RabbitMQ at mq.example:5672/prod refused user "callgate": wrong user or password (403: username or password not allowed)`},
		{"server's access refused", dial(&amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED - Login was refused", Server: true}),
			`refused user "callgate": wrong user or password (403: ACCESS_REFUSED - Login was refused)`},
		{"vhost", dial(&amqp.Error{Code: amqp.NotAllowed, Reason: "NOT_ALLOWED - vhost prod not found", Server: true}),
			`refused user "callgate" the vhost "prod"`},
		{"permissions", &declareError{fmt.Errorf("error declaring topology: %w",
			&amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED - access to exchange 'callgate.callbacks' refused", Server: true})},
			`refused user "callgate" callgate's exchanges and queues`},
		{"connection limit", dial(&amqp.Error{Code: amqp.NotAllowed, Reason: "NOT_ALLOWED - connection limit (10) is reached", Server: true}), ""},
		{"down", dial(errors.New("dial tcp 10.0.0.1:5672: connect: connection refused")), ""},
		{"a local 403 that is not the broker's", dial(&amqp.Error{Code: amqp.AccessRefused, Reason: "x", Server: false}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := asRefused(tc.err, "amqp.urls", url)
			if tc.want == "" {
				require.Nil(t, r)
				return
			}
			require.NotNil(t, r)
			require.Equal(t, "amqp.urls", r.Setting())
			require.Contains(t, r.Error(), tc.want)
			require.NotContains(t, r.Error(), "s3cret-pw")
		})
	}
}
