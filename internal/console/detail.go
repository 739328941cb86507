package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
)

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
