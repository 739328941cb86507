package console

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
)

// TestDashboardReplicaCard renders the dashboard with each replica state
// the Stats can carry: no card with durability primary, "acknowledging",
// and "not acknowledging" with the reason (a template that compared the
// *string to a string failed on every dashboard with durability replica).
func TestDashboardReplicaCard(t *testing.T) {
	card := regexp.MustCompile(`id="mysql-replica">([^<]*)<`)
	reason := regexp.MustCompile(`id="mysql-replica-reason">([^<]*)<`)
	render := func(replica *string) string {
		d := newDashboardView(&admin.Stats{MySQLReplica: replica})
		var buf bytes.Buffer
		require.NoError(t, pageTemplates["dashboard"].ExecuteTemplate(&buf, "layout", &view{Title: "Dashboard", Page: d}))
		return buf.String()
	}
	require.NotContains(t, render(nil), `id="mysql-replica"`, "no card with durability primary")

	ok := admin.ReplicaAcknowledging
	page := render(&ok)
	require.Equal(t, "acknowledging", card.FindStringSubmatch(page)[1])
	require.Nil(t, reason.FindStringSubmatch(page))

	down := "unavailable: no replica acknowledges commits <now>"
	page = render(&down)
	require.Equal(t, "not acknowledging", card.FindStringSubmatch(page)[1])
	require.Equal(t, "unavailable: no replica acknowledges commits &lt;now&gt;", reason.FindStringSubmatch(page)[1])
}

// TestDashboardUnroutedIsInformation: notifications nobody subscribes to
// (the demo has no subscribers) are counted as information, in the
// neutral style with what they mean, not as an alarm; only past half the
// unrouted queue's bound, where RabbitMQ soon drops the oldest, is the
// card marked bad, as the alert CallgateDownstreamUnroutedNearLimit fires.
func TestDashboardUnroutedIsInformation(t *testing.T) {
	card := regexp.MustCompile(`<div class="([^"]*)" id="downstream-unrouted-card"`)
	note := regexp.MustCompile(`id="downstream-unrouted-note">([^<]*)<`)
	render := func(unrouted *int64, limit int64) (class, hint string) {
		d := newDashboardView(&admin.Stats{DownstreamUnrouted: unrouted, DownstreamUnroutedLimit: limit})
		var buf bytes.Buffer
		require.NoError(t, pageTemplates["dashboard"].ExecuteTemplate(&buf, "layout", &view{Title: "Dashboard", Page: d}))
		m := card.FindStringSubmatch(buf.String())
		require.NotNil(t, m, buf.String())
		if n := note.FindStringSubmatch(buf.String()); n != nil {
			hint = n[1]
		}
		return m[1], hint
	}
	n := func(v int64) *int64 { return &v }

	class, hint := render(n(0), 100000)
	require.Equal(t, "card stat", class)
	require.Empty(t, hint)

	class, hint = render(n(42), 100000)
	require.Equal(t, "card stat", class, "a parked notification is no alarm")
	require.Contains(t, hint, "no subscriber is bound for their routing key")

	class, _ = render(n(42), 0)
	require.Equal(t, "card stat", class, "bound not known")

	class, hint = render(n(50001), 100000)
	require.Equal(t, "card stat bad", class, "past half the bound the oldest will be dropped")
	require.Contains(t, hint, "past half the queue's bound of 100000")

	class, hint = render(nil, 100000)
	require.Equal(t, "card stat", class, "unknown (broker away)")
	require.Empty(t, hint)
}
