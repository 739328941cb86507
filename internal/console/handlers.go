package console

import (
	"bytes"
	"callgate/internal/admin"
	"callgate/internal/callback"
	"callgate/internal/replay"
	"callgate/internal/store"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// callbackStatuses in the order pages show them.
var callbackStatuses = []string{"PENDING", "SUCCESS", "FAILED"}

// pageID reads :id; false means it answered.
func (h *Console) pageID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		h.renderError(c, http.StatusNotFound, "Not found.")
		return 0, false
	}
	return id, true
}

// --- dashboard ---

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

// --- callbacks list ---

// listForm is the list filter as typed, to show it back.
type listForm struct {
	Status, Source, Kind, Key, EventID, Since, Until, Limit, Cursor, Origin string
}

func (f listForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "source": f.Source, "kind": f.Kind, "key": f.Key,
		"event_id": f.EventID, "since": f.Since, "until": f.Until, "limit": f.Limit, "origin": f.Origin} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

type listView struct {
	Form     listForm
	Statuses []string
	// Origins are the origin select's choices.
	Origins []string
	Items   []callback.Summary
	// Older is the next page's URL, Newest the first page's (when not on
	// it).
	Older, Newest string
	Searched      bool
}

func (h *Console) callbacksPage(c *gin.Context) {
	q := func(k string) string { return strings.TrimSpace(c.Query(k)) }
	form := listForm{Status: q("status"), Source: q("source"), Kind: q("kind"), Key: q("key"), EventID: q("event_id"),
		Since: q("since"), Until: q("until"), Limit: q("limit"), Cursor: q("cursor"), Origin: q("origin")}
	lv := listView{Form: form, Statuses: callbackStatuses, Origins: []string{callback.OriginNotify, callback.OriginReconcile},
		Searched: len(form.values()) > 0}
	v := &view{Title: "Callbacks", Nav: "callbacks", Page: &lv}
	f, err := admin.ParseListFilter(func(k string) string {
		switch k {
		case "since", "until":
			return normTime(q(k))
		}
		return q(k)
	})
	if err != nil {
		v.Error = err.Error()
		h.render(c, http.StatusBadRequest, "callbacks", v)
		return
	}
	page, err := h.Service.List(c.Request.Context(), f)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	lv.Items = page.Items
	if page.NextCursor != nil {
		vals := form.values()
		vals.Set("cursor", strconv.FormatInt(*page.NextCursor, 10))
		lv.Older = "/admin/callbacks?" + vals.Encode()
	}
	if form.Cursor != "" {
		lv.Newest = "/admin/callbacks?" + form.values().Encode()
	}
	h.render(c, http.StatusOK, "callbacks", v)
}

// normTime accepts what people type besides RFC 3339 (a date, a date and
// time without zone, taken as UTC) and returns RFC 3339; anything else is
// returned as is for the filter to reject.
func normTime(s string) string {
	if s == "" {
		return s
	}
	if _, err := time.Parse(time.RFC3339, s); err == nil {
		return s
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.Format(time.RFC3339)
		}
	}
	return s
}

// --- callback detail and replay ---

type detailView struct {
	D *admin.Detail
	// Payload is pretty-printed when it is JSON.
	Payload       string
	PayloadIsJSON bool
	// Normalized is the preset's canonical event, pretty-printed ("" when
	// the source has no preset).
	Normalized string
	Replayable bool
	CanForce   bool
	Reason     string
	Force      bool
	// Money is the money history of a payment callback's order, one row a
	// payment, refund or dispute (nil: none).
	Money []moneyRow
	// Happened and Arrived are the order's facts by the platform's time
	// (as the order's money is derived) and by arrival.
	Happened, Arrived []factRow
}

// factRow is one fact of an order, as the callback's page lists it.
type factRow struct {
	Arrival                            int
	When, What, Number, Status, Amount string
	Log                                int64
	This                               bool
}

// factRows lists an order's facts by the platform's time and by arrival.
func factRows(m *admin.MoneyHistory, id int64) (happened, arrived []factRow) {
	for _, f := range m.Facts {
		when := "received " + f.ReceivedAt.UTC().Format(time.RFC3339)
		if f.OccurredAt != nil {
			when = f.OccurredAt.UTC().Format(time.RFC3339)
		}
		number := f.Ref
		if f.PaymentNo != "" && f.PaymentNo != f.Ref {
			number += " (of " + f.PaymentNo + ")"
		}
		status := f.Status
		if f.Reason != nil && *f.Reason != "" {
			status += ": " + *f.Reason
		}
		happened = append(happened, factRow{Arrival: f.Arrival, When: when, What: f.Kind, Number: number, Status: status,
			Amount: fmt.Sprintf("%d %s", f.Amount, f.Currency), Log: f.CallbackLogID, This: f.CallbackLogID == id})
	}
	arrived = append([]factRow(nil), happened...)
	sort.SliceStable(arrived, func(i, j int) bool { return arrived[i].Arrival < arrived[j].Arrival })
	return happened, arrived
}

// moneyRow is one payment, refund or dispute of an order, as the
// callback's page lists it.
type moneyRow struct {
	What, Number, Status, Amount string
	// Logs are the callbacks that recorded it first and last changed it.
	Logs []int64
	// This: the callback on the page is one of them.
	This bool
}

// moneyRows lists an order's money history for callback id's page.
func moneyRows(m *admin.MoneyHistory, id int64) []moneyRow {
	amount := func(n int64, currency string) string { return fmt.Sprintf("%d %s", n, currency) }
	logs := func(first, last int64) []int64 {
		if first == last || last == 0 {
			return []int64{first}
		}
		return []int64{first, last}
	}
	var rows []moneyRow
	add := func(r moneyRow) {
		r.This = slices.Contains(r.Logs, id)
		rows = append(rows, r)
	}
	for _, p := range m.Payments {
		status := p.Status
		if p.Paying {
			status += ", paid the order"
		}
		add(moneyRow{What: "payment", Number: p.PaymentNo, Status: status, Amount: amount(p.Amount, p.Currency), Logs: logs(p.CallbackLogID, p.LastLogID)})
	}
	for _, r := range m.Refunds {
		status := r.Status
		if r.Reason != nil && *r.Reason != "" {
			status += ": " + *r.Reason
		}
		add(moneyRow{What: "refund", Number: r.RefundNo, Status: status, Amount: amount(r.Amount, r.Currency), Logs: logs(r.CallbackLogID, r.LastLogID)})
	}
	for _, d := range m.Disputes {
		add(moneyRow{What: "dispute", Number: d.DisputeID, Status: d.Status, Amount: amount(d.Amount, d.Currency), Logs: logs(d.CallbackLogID, d.LastLogID)})
	}
	return rows
}

func (h *Console) loadDetail(c *gin.Context, id int64) (*detailView, error) {
	d, err := h.Service.Get(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	dv := &detailView{D: d, Payload: d.Payload}
	if len(d.PayloadJSON) > 0 {
		var buf bytes.Buffer
		if json.Indent(&buf, d.PayloadJSON, "", "  ") == nil {
			dv.Payload, dv.PayloadIsJSON = buf.String(), true
		}
	}
	if len(d.Normalized) > 0 {
		var buf bytes.Buffer
		if json.Indent(&buf, d.Normalized, "", "  ") == nil {
			dv.Normalized = buf.String()
		}
	}
	dv.Replayable = d.Status == "FAILED" || d.Status == "SUCCESS"
	dv.CanForce = d.Status == "SUCCESS"
	if d.Money != nil {
		dv.Money = moneyRows(d.Money, d.ID)
		dv.Happened, dv.Arrived = factRows(d.Money, d.ID)
	}
	return dv, nil
}

func (h *Console) detailPage(c *gin.Context) {
	id, ok := h.pageID(c)
	if !ok {
		return
	}
	dv, err := h.loadDetail(c, id)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	v := &view{Title: fmt.Sprintf("Callback %d", id), Nav: "callbacks", Page: dv}
	if c.Query("replayed") == "1" {
		v.Flash = "Replay accepted: the callback is PENDING again and was announced to the workers. Reload to follow it."
	}
	h.render(c, http.StatusOK, "detail", v)
}

func (h *Console) replayPage(c *gin.Context) {
	id, ok := h.pageID(c)
	if !ok {
		return
	}
	reason := c.PostForm("reason")
	force := c.PostForm("force") != ""
	_, err := h.Replays.Replay(c.Request.Context(), c.GetString(admin.CtxActor), id, reason, force)
	if err == nil {
		c.Redirect(http.StatusSeeOther, fmt.Sprintf("/admin/callbacks/%d?replayed=1", id))
		return
	}
	status, msg := userError(err)
	if status == 0 || status == http.StatusNotFound {
		h.pageFail(c, err)
		return
	}
	dv, lerr := h.loadDetail(c, id)
	if lerr != nil {
		h.pageFail(c, lerr)
		return
	}
	dv.Reason, dv.Force = reason, force
	h.render(c, status, "detail", &view{Title: fmt.Sprintf("Callback %d", id), Nav: "callbacks", Error: "Not replayed: " + msg, Page: dv})
}

// --- bulk replays ---

// bulkForm is the bulk replay form as typed; the dry-run page carries it
// on, hidden, to the confirmation.
type bulkForm struct {
	Status, Source, Kind, Since, Until, ErrorContains, IDs, Reason string
	ConfirmLarge                                                   bool
}

func readBulkForm(c *gin.Context) bulkForm {
	p := func(k string) string { return strings.TrimSpace(c.PostForm(k)) }
	return bulkForm{Status: p("status"), Source: p("source"), Kind: p("kind"), Since: p("since"), Until: p("until"),
		ErrorContains: p("error_contains"), IDs: p("ids"), Reason: p("reason"), ConfirmLarge: p("confirm_large") != ""}
}

// filter turns the form into a replay.BulkFilter.
func (f bulkForm) filter() (replay.BulkFilter, error) {
	bf := replay.BulkFilter{Status: f.Status, Source: f.Source, Kind: f.Kind, ErrorContains: f.ErrorContains}
	var err error
	if bf.Since, err = admin.ParseTime(normTime(f.Since)); err != nil {
		return bf, errors.New("since: want RFC 3339, e.g. 2026-01-02T00:00:00Z")
	}
	if bf.Until, err = admin.ParseTime(normTime(f.Until)); err != nil {
		return bf, errors.New("until: want RFC 3339, e.g. 2026-01-02T00:00:00Z")
	}
	for _, s := range strings.FieldsFunc(f.IDs, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' }) {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			return bf, fmt.Errorf("ids: %q is not a callback id", callback.Truncate(s, 20))
		}
		bf.IDs = append(bf.IDs, id)
	}
	return bf, nil
}

type replaysView struct {
	Jobs []store.ReplayJob
	Form bulkForm
}

func (h *Console) replaysPage(c *gin.Context) {
	h.showReplays(c, http.StatusOK, bulkForm{Status: "FAILED"}, "")
}

func (h *Console) showReplays(c *gin.Context, status int, form bulkForm, msg string) {
	jobs, err := h.Replays.ListJobs(c.Request.Context(), 50)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	h.render(c, status, "replays", &view{Title: "Replays", Nav: "replays", Error: msg, Page: replaysView{Jobs: jobs, Form: form}})
}

type dryRunView struct {
	Form   bulkForm
	Result *replay.DryRunResult
}

func (h *Console) dryRunPage(c *gin.Context) {
	form := readBulkForm(c)
	f, err := form.filter()
	if err != nil {
		h.showReplays(c, http.StatusBadRequest, form, err.Error())
		return
	}
	if form.Reason == "" {
		h.showReplays(c, http.StatusBadRequest, form, replay.ErrReasonRequired.Error())
		return
	}
	h.showDryRun(c, http.StatusOK, form, f, "")
}

func (h *Console) showDryRun(c *gin.Context, status int, form bulkForm, f replay.BulkFilter, msg string) {
	res, err := h.Replays.DryRun(c.Request.Context(), f)
	if err != nil {
		if st, umsg := userError(err); st != 0 {
			h.showReplays(c, st, form, umsg)
			return
		}
		h.pageFail(c, err)
		return
	}
	h.render(c, status, "dryrun", &view{Title: "Confirm bulk replay", Nav: "replays", Error: msg, Page: dryRunView{Form: form, Result: res}})
}

func (h *Console) createJobPage(c *gin.Context) {
	form := readBulkForm(c)
	f, err := form.filter()
	if err != nil {
		h.showReplays(c, http.StatusBadRequest, form, err.Error())
		return
	}
	job, err := h.Replays.CreateJob(c.Request.Context(), c.GetString(admin.CtxActor), form.Reason, f, form.ConfirmLarge)
	if err != nil {
		switch status, msg := userError(err); {
		case errors.Is(err, replay.ErrTooLarge):
			h.showDryRun(c, status, form, f, msg)
		case status != 0:
			h.showReplays(c, status, form, msg)
		default:
			h.pageFail(c, err)
		}
		return
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/admin/replays/%d?created=1", job.ID))
}

type jobView struct {
	Job    *store.ReplayJob
	Filter string
}

func (h *Console) jobPage(c *gin.Context) {
	id, ok := h.pageID(c)
	if !ok {
		return
	}
	job, err := h.Replays.GetJob(c.Request.Context(), id)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	v := &view{Title: fmt.Sprintf("Replay job %d", id), Nav: "replays", Refresh: job.Status == store.ReplayRunning,
		Page: jobView{Job: job, Filter: prettyJSON(job.Filter)}}
	switch {
	case c.Query("created") == "1":
		v.Flash = "Bulk replay started: the worker replays the matched callbacks at the configured rate."
	case c.Query("cancelled") == "1":
		v.Flash = "Replay job cancelled; what it replayed so far stays replayed."
	case c.Query("error") == "finished":
		v.Error = replay.ErrJobFinished.Error() + "."
	}
	h.render(c, http.StatusOK, "job", v)
}

func (h *Console) cancelJobPage(c *gin.Context) {
	id, ok := h.pageID(c)
	if !ok {
		return
	}
	if _, err := h.Replays.CancelJob(c.Request.Context(), c.GetString(admin.CtxActor), id); err != nil {
		if errors.Is(err, replay.ErrJobFinished) {
			c.Redirect(http.StatusSeeOther, fmt.Sprintf("/admin/replays/%d?error=finished", id))
			return
		}
		h.pageFail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/admin/replays/%d?cancelled=1", id))
}

// --- audit ---

type auditRow struct {
	store.AuditEntry
	Link   string
	Filter string
}

func (h *Console) auditPage(c *gin.Context) {
	entries, err := h.Service.Audit(c.Request.Context(), 200)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	rows := make([]auditRow, len(entries))
	for i, e := range entries {
		rows[i] = auditRow{AuditEntry: e, Link: auditLink(e.Target)}
		if len(e.Filter) > 0 {
			var buf bytes.Buffer
			if json.Compact(&buf, e.Filter) == nil {
				rows[i].Filter = buf.String()
			} else {
				rows[i].Filter = string(e.Filter)
			}
		}
	}
	h.render(c, http.StatusOK, "audit", &view{Title: "Audit trail", Nav: "audit", Page: rows})
}

// auditLink is the page of an audit target: "job:N" or a callback id.
func auditLink(target string) string {
	if n, ok := strings.CutPrefix(target, "job:"); ok {
		if _, err := strconv.ParseInt(n, 10, 64); err == nil {
			return "/admin/replays/" + n
		}
		return ""
	}
	if _, err := strconv.ParseInt(target, 10, 64); err == nil {
		return "/admin/callbacks/" + target
	}
	return ""
}

// --- reconciliation ---

type reconcileView struct {
	U *admin.Unresolved
	// More: the limit cut the list (U.Count is more than shown).
	More bool
}

// reconcilePage lists the orders reconciliation gave up on that are still
// UNPAID, each with a link to its callbacks.
func (h *Console) reconcilePage(c *gin.Context) {
	limit, err := admin.ParseUnresolvedLimit(strings.TrimSpace(c.Query("limit")))
	if err != nil {
		h.renderError(c, http.StatusBadRequest, err.Error())
		return
	}
	u, err := h.Service.Unresolved(c.Request.Context(), limit)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	h.render(c, http.StatusOK, "reconcile", &view{Title: "Reconciliation", Nav: "reconcile",
		Page: reconcileView{U: u, More: u.Count > int64(len(u.Orders))}})
}
