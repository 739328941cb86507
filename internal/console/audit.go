package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"callgate/internal/store"
)

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
