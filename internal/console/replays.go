package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
	"callgate/internal/callback"
	"callgate/internal/replay"
	"callgate/internal/store"
)

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
