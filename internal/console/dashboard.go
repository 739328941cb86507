package console

import (
	"net/http"
	"sort"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
)

type countCell struct {
	Status string
	N      int64
}

type countRow struct {
	Source string
	Cells  []countCell
	Total  int64
}

type dashboardView struct {
	Stats    *admin.Stats
	Statuses []string
	Rows     []countRow
	Totals   []countCell
	Total    int64
	Chart    chart
	// Unrouted is Stats.DownstreamUnrouted, when UnroutedKnown. It is
	// information, not an alarm: a notification nobody subscribes to is
	// parked, which is normal where a routing key has no subscriber (the
	// demo has none). UnroutedNearLimit marks it past half the queue's
	// bound, where the oldest are soon dropped.
	Unrouted          int64
	UnroutedKnown     bool
	UnroutedNearLimit bool
	// Replica is Stats.MySQLReplica, shown when ReplicaShown (durability
	// replica); templates compare strings, not pointers.
	Replica      string
	ReplicaShown bool
	// DeadLettersDropped totals Stats.DeadLettersDropped, which lists it
	// by source.
	DeadLettersDropped int64
}

func (h *Console) dashboard(c *gin.Context) {
	st, err := h.Service.Stats(c.Request.Context())
	if err != nil {
		h.pageFail(c, err)
		return
	}
	h.render(c, http.StatusOK, "dashboard", &view{Title: "Dashboard", Nav: "dashboard", Page: newDashboardView(st)})
}

// newDashboardView arranges the figures for the dashboard template.
func newDashboardView(st *admin.Stats) dashboardView {
	d := dashboardView{Stats: st, Statuses: callbackStatuses, Chart: newChart(st.Series)}
	if st.MySQLReplica != nil {
		d.Replica, d.ReplicaShown = *st.MySQLReplica, true
	}
	if st.DownstreamUnrouted != nil {
		d.Unrouted, d.UnroutedKnown = *st.DownstreamUnrouted, true
		d.UnroutedNearLimit = st.DownstreamUnroutedLimit > 0 && 2*d.Unrouted > st.DownstreamUnroutedLimit
	}
	for _, dl := range st.DeadLettersDropped {
		d.DeadLettersDropped += dl.Dropped
	}
	sources := map[string]bool{}
	for _, bySource := range st.Counts {
		for src := range bySource {
			sources[src] = true
		}
	}
	names := make([]string, 0, len(sources))
	for s := range sources {
		names = append(names, s)
	}
	sort.Strings(names)
	totals := map[string]int64{}
	for _, src := range names {
		row := countRow{Source: src}
		for _, status := range callbackStatuses {
			n := st.Counts[status][src]
			row.Cells = append(row.Cells, countCell{Status: status, N: n})
			row.Total += n
			totals[status] += n
		}
		d.Rows = append(d.Rows, row)
		d.Total += row.Total
	}
	for _, status := range callbackStatuses {
		d.Totals = append(d.Totals, countCell{Status: status, N: totals[status]})
	}
	return d
}
