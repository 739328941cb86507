package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
	"callgate/internal/callback"
)

// callbackStatuses in the order pages show them.
var callbackStatuses = []string{"PENDING", "SUCCESS", "FAILED"}

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
