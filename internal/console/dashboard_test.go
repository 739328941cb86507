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
