package console

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
	"callgate/internal/store"
)

// TestDashboardShowsDeadLettersDropped: the dashboard's "Dead letters
// dropped by retention" card totals the count of every source and lists
// each; with none dropped it says 0.
func TestDashboardShowsDeadLettersDropped(t *testing.T) {
	total := regexp.MustCompile(`id="dead-letters-dropped">([^<]*)<`)
	render := func(st *admin.Stats) string {
		var buf bytes.Buffer
		require.NoError(t, pageTemplates["dashboard"].ExecuteTemplate(&buf, "layout", &view{Title: "Dashboard", Page: newDashboardView(st)}))
		return buf.String()
	}
	page := render(&admin.Stats{})
	require.Contains(t, page, "Dead letters dropped by retention")
	require.Equal(t, "0", total.FindStringSubmatch(page)[1])

	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	page = render(&admin.Stats{DeadLettersDropped: []store.DroppedDeadLetters{
		{Source: "adyen", Dropped: 2, LastDroppedAt: at}, {Source: "stripe", Dropped: 40, LastDroppedAt: at}}})
	require.Equal(t, "42", total.FindStringSubmatch(page)[1])
	require.Regexp(t, `id="dead-letters-dropped-adyen" title="last dropped 2026-03-04 05:06:07 UTC">adyen: 2<`, page)
	require.Regexp(t, `id="dead-letters-dropped-stripe"[^>]*>stripe: 40<`, page)
}
