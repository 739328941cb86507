package console

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
)

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
