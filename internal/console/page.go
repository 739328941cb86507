package console

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
)

// What every page shares: the view its template gets, rendering, the
// error page, reading :id.

// view is what every page template gets; Page is the page's own data.
type view struct {
	Title string
	Nav   string
	Actor string
	// Role is the signed-in person's; CanWrite shows the replay and
	// cancel forms (the write routes check the role themselves).
	Role     admin.Role
	CanWrite bool
	CSRF     string
	// MoveTo, when set, sends the browser on at once (meta refresh).
	MoveTo  string
	Flash   string
	Error   string
	Refresh bool
	Page    any
}

// render executes a page into a buffer first, so a template error never
// sends half a page.
func (h *Console) render(c *gin.Context, status int, name string, v *view) {
	if v.Actor == "" {
		v.Actor = c.GetString(admin.CtxActor)
	}
	if sess := currentSession(c); sess != nil {
		v.CSRF = sess.ID.CSRF()
		v.Role, v.CanWrite = sess.Role, sess.Role.CanWrite()
	}
	t, ok := pageTemplates[name]
	var buf bytes.Buffer
	if ok {
		if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
			ok = false
			h.Log.ErrorContext(c.Request.Context(), "admin: page template failed", "page", name, "error", err)
		}
	}
	if !ok {
		c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("internal error rendering the page"))
		return
	}
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// renderError shows a message in the layout.
func (h *Console) renderError(c *gin.Context, status int, msg string) {
	h.render(c, status, "error", &view{Title: http.StatusText(status), Error: msg})
}

// pageFail shows a service error: the ones the operator can act on with
// their message, unexpected ones logged and not shown.
func (h *Console) pageFail(c *gin.Context, err error) {
	if status, msg := userError(err); status != 0 {
		h.renderError(c, status, msg)
		return
	}
	h.Log.ErrorContext(c.Request.Context(), "admin: page request failed", "path", c.Request.URL.Path, "error", err)
	h.renderError(c, http.StatusServiceUnavailable, "Storage is temporarily unavailable, please retry.")
}

// userError is the status and message of an error the operator can act on,
// or 0 for one that is not theirs.
func userError(err error) (int, string) {
	switch status := admin.UserErrorStatus(err); status {
	case 0:
		return 0, ""
	case http.StatusNotFound:
		return status, "Not found."
	default:
		return status, err.Error()
	}
}

// pageID reads :id; false means it answered.
func (h *Console) pageID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		h.renderError(c, http.StatusNotFound, "Not found.")
		return 0, false
	}
	return id, true
}
