package intake

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// DisabledLogEvery is how often at most a disabled source's requests are
// logged: the first request, then one line a minute while they go on,
// counting those not logged. Anyone may post to a disabled source as often
// as they like; the log is not theirs to fill.
const DisabledLogEvery = time.Minute

// disabledLog remembers, per disabled source (names from the config, never
// from a request), when its requests were last logged and how many came
// since.
type disabledLog struct {
	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

// take says whether a request to source at now is logged, and how many
// were not since the last line.
func (d *disabledLog) take(source string, now time.Time) (log bool, skipped int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last, d.suppressed = map[string]time.Time{}, map[string]int{}
	}
	if last, ok := d.last[source]; ok && now.Sub(last) < DisabledLogEvery {
		d.suppressed[source]++
		return false, 0
	}
	skipped = d.suppressed[source]
	d.last[source], d.suppressed[source] = now, 0
	return true, skipped
}

// refuseDisabled answers a request to a disabled source 404, naming it as
// not enabled (a platform pointed at a gateway that lacks its keys learns
// which mistake it is; why naming it is acceptable: docs/security.md,
// "What a 404 tells"), and logs why the source is disabled, which the
// caller is not told, at most once per source per DisabledLogEvery, with
// the request's trace id.
func (h *Handler) refuseDisabled(c *gin.Context, source, reason string) {
	now := time.Now()
	if h.Now != nil {
		now = h.Now()
	}
	if ok, skipped := h.disabled.take(source, now); ok {
		attrs := []any{"status", http.StatusNotFound, "source", source, "reason", reason}
		if skipped > 0 {
			// Requests to this source since its last line, not logged.
			attrs = append(attrs, "not_logged", skipped)
		}
		h.Log.WarnContext(c.Request.Context(), "intake: request to a disabled source (answered 404 not enabled)", attrs...)
	}
	WriteError(c, http.StatusNotFound, notEnabled(source))
}

// notEnabled is the answer to a request for a disabled source; source is
// a name from the config.
func notEnabled(source string) string {
	return fmt.Sprintf("source %q is not enabled on this gateway", source)
}
