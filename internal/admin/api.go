package admin

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/callback"
	"callgate/internal/clientaddr"
	"callgate/internal/replay"
	"callgate/internal/store"
)

// Handler serves the admin API, and holds what the console shares with it:
// the tokens, the failed-login limiter, the sessions and the services.
type Handler struct {
	Service *Service
	// Replays carries out replays, single and bulk.
	Replays *replay.Replayer
	Tokens  Tokens
	Log     *slog.Logger
	// Secure marks the session cookie Secure (the gateway serves TLS).
	Secure bool
	// Failures rate-limits failed authentications per client address.
	// Default: 10 in a row, then one per 6 s.
	Failures *FailureLimiter
	// SSO signs people in with OpenID Connect (admin.oidc); nil when no
	// issuer is configured.
	SSO *SSO
	// SSOFailures rate-limits suspect sign-ins (forged redirects) per
	// client address, apart from Failures: bad tokens must not lock
	// people out of single sign-on. Default as Failures.
	SSOFailures *FailureLimiter
	// Proxies are admin.trusted_proxies: behind one, the client is the
	// address it forwarded (ClientAddr).
	Proxies clientaddr.Proxies
	once    sync.Once
	// forwardedSeen: the warning about X-Forwarded-For without
	// trusted_proxies was logged.
	forwardedSeen atomic.Bool
}

// CtxActor is the gin context key of the authenticated operator's name.
const CtxActor = "callgate.admin.actor"

// Enabled reports whether any admin token or single sign-on is configured:
// without either the operator surface (API and console) answers 404, off
// rather than open.
func (h *Handler) Enabled() bool { return h.Tokens.Enabled() || h.SSO != nil }

// Limiter is the failed-login limiter, created on first use.
func (h *Handler) Limiter() *FailureLimiter {
	h.once.Do(h.limiters)
	return h.Failures
}

// SSOLimiter is the suspect sign-in limiter, created on first use.
func (h *Handler) SSOLimiter() *FailureLimiter {
	h.once.Do(h.limiters)
	return h.SSOFailures
}

func (h *Handler) limiters() {
	if h.Failures == nil {
		h.Failures = &FailureLimiter{Every: 6 * time.Second, Burst: 10}
	}
	if h.SSOFailures == nil {
		h.SSOFailures = &FailureLimiter{Every: 6 * time.Second, Burst: 10}
	}
}

// Mount adds /admin/api/... to r.
func (h *Handler) Mount(r *gin.Engine) {
	if !h.Enabled() {
		return // NoRoute answers 404
	}
	h.Limiter()
	api := r.Group("/admin/api", h.Client, h.bearer)
	api.GET("/callbacks", h.apiList)
	api.GET("/callbacks/:id", h.apiGet)
	api.POST("/callbacks/:id/replay", h.operator, h.apiReplay)
	api.POST("/replays", h.operator, h.apiBulk)
	api.GET("/replays", h.apiJobs)
	api.GET("/replays/:id", h.apiJob)
	api.DELETE("/replays/:id", h.operator, h.apiCancel)
	api.GET("/audit", h.apiAudit)
	api.GET("/stats", h.apiStats)
	api.GET("/reconcile/unresolved", h.apiUnresolved)
}

// bearer authenticates Authorization: Bearer <token>. A valid token is
// never refused because others failed from the same address (behind a
// proxy, everybody's): the failure limiter only answers failures.
func (h *Handler) bearer(c *gin.Context) {
	auth := c.GetHeader("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	id, err := h.Tokens.Authenticate(strings.TrimSpace(token))
	if !ok || err != nil {
		if h.tooManyFailures(c) {
			return
		}
		h.Failures.Fail(ClientAddr(c))
		h.Log.WarnContext(c.Request.Context(), "admin: rejected API call", "path", c.Request.URL.Path, "remote", ClientAddr(c))
		c.Header("WWW-Authenticate", `Bearer realm="callgate-admin"`)
		apiError(c, http.StatusUnauthorized, ErrBadToken.Error())
		return
	}
	SetIdentity(c, id)
	c.Next()
}

// tooManyFailures answers 429 when the client failed too often.
func (h *Handler) tooManyFailures(c *gin.Context) bool {
	blocked, wait := h.Failures.Blocked(ClientAddr(c))
	if !blocked {
		return false
	}
	c.Header("Retry-After", strconv.Itoa(max(1, int(wait.Seconds()+0.5))))
	h.Log.WarnContext(c.Request.Context(), "admin: too many failed authentications", "remote", ClientAddr(c))
	apiError(c, http.StatusTooManyRequests, "too many failed authentications, retry later")
	return true
}

func apiError(c *gin.Context, status int, reason string) {
	c.AbortWithStatusJSON(status, gin.H{"error": reason})
}

// fail maps service errors to answers; unexpected ones are logged, not shown.
func (h *Handler) fail(c *gin.Context, err error) {
	if status := UserErrorStatus(err); status != 0 {
		msg := err.Error()
		if status == http.StatusNotFound {
			msg = "not found"
		}
		apiError(c, status, msg)
		return
	}
	h.Log.ErrorContext(c.Request.Context(), "admin: request failed", "path", c.Request.URL.Path, "error", err)
	apiError(c, http.StatusServiceUnavailable, "storage temporarily unavailable, please retry")
}

// UserErrorStatus is the HTTP status of an error the operator can act on
// (a callback or job that does not exist, a replay refused), or 0 for one
// that is not theirs.
func UserErrorStatus(err error) int {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, replay.ErrReasonRequired), errors.Is(err, replay.ErrEmptyFilter), errors.Is(err, replay.ErrBadFilter):
		return http.StatusBadRequest
	case errors.Is(err, replay.ErrNotReplayable), errors.Is(err, replay.ErrTooLarge), errors.Is(err, replay.ErrJobFinished):
		return http.StatusConflict
	}
	return 0
}

// ParseTime reads an RFC 3339 time; "" is none.
func ParseTime(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// ParseListFilter reads the list query parameters (shared with the
// console).
func ParseListFilter(q func(string) string) (ListFilter, error) {
	f := ListFilter{Status: q("status"), Source: q("source"), Kind: q("kind"), Key: q("key"), EventID: q("event_id"), Origin: q("origin")}
	var err error
	if f.Since, err = ParseTime(q("since")); err != nil {
		return f, errors.New("since: want RFC 3339, e.g. 2026-01-02T00:00:00Z")
	}
	if f.Until, err = ParseTime(q("until")); err != nil {
		return f, errors.New("until: want RFC 3339, e.g. 2026-01-02T00:00:00Z")
	}
	if v := q("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > 500 {
			return f, errors.New("limit: want 1..500")
		}
	}
	if v := q("cursor"); v != "" {
		if f.Cursor, err = strconv.ParseInt(v, 10, 64); err != nil || f.Cursor < 1 {
			return f, errors.New("cursor: want the next_cursor of the previous page")
		}
	}
	switch callback.Status(f.Status) {
	case "", callback.StatusPending, callback.StatusSuccess, callback.StatusFailed:
	default:
		return f, errors.New("status: want PENDING, SUCCESS or FAILED")
	}
	if f.Origin != "" && !callback.KnownOrigin(f.Origin) {
		return f, errors.New("origin: want notify or reconcile")
	}
	return f, nil
}

func (h *Handler) apiList(c *gin.Context) {
	f, err := ParseListFilter(c.Query)
	if err != nil {
		apiError(c, http.StatusBadRequest, err.Error())
		return
	}
	page, err := h.Service.List(c.Request.Context(), f)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, page)
}

func idParam(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		apiError(c, http.StatusBadRequest, "id: want a positive integer")
		return 0, false
	}
	return id, true
}

func (h *Handler) apiGet(c *gin.Context) {
	id, ok := idParam(c)
	if !ok {
		return
	}
	d, err := h.Service.Get(c.Request.Context(), id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

func bindJSON(c *gin.Context, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		apiError(c, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func (h *Handler) apiReplay(c *gin.Context) {
	id, ok := idParam(c)
	if !ok {
		return
	}
	var req struct {
		Reason string `json:"reason"`
		Force  bool   `json:"force"`
	}
	if !bindJSON(c, &req) {
		return
	}
	sum, err := h.Replays.Replay(c.Request.Context(), c.GetString(CtxActor), id, req.Reason, req.Force)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"replayed": true, "callback": sum})
}

// BulkRequest is POST /admin/api/replays.
type BulkRequest struct {
	replay.BulkFilter
	Filter       *replay.BulkFilter `json:"filter,omitempty"`
	Reason       string             `json:"reason"`
	DryRun       bool               `json:"dry_run"`
	ConfirmLarge bool               `json:"confirm_large"`
}

func (h *Handler) apiBulk(c *gin.Context) {
	var req BulkRequest
	if !bindJSON(c, &req) {
		return
	}
	f := req.BulkFilter
	if req.Filter != nil { // the filter may come flat or under "filter"
		f = *req.Filter
	}
	if req.DryRun {
		res, err := h.Replays.DryRun(c.Request.Context(), f)
		if err != nil {
			h.fail(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"dry_run": true, "matched": res.Matched, "sample": res.Sample, "over_cap": res.OverCap, "cap": res.Cap})
		return
	}
	job, err := h.Replays.CreateJob(c.Request.Context(), c.GetString(CtxActor), req.Reason, f, req.ConfirmLarge)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, job)
}

func (h *Handler) apiJobs(c *gin.Context) {
	jobs, err := h.Replays.ListJobs(c.Request.Context(), 50)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"items": jobs})
}

func (h *Handler) apiJob(c *gin.Context) {
	id, ok := idParam(c)
	if !ok {
		return
	}
	job, err := h.Replays.GetJob(c.Request.Context(), id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, job)
}

func (h *Handler) apiCancel(c *gin.Context) {
	id, ok := idParam(c)
	if !ok {
		return
	}
	job, err := h.Replays.CancelJob(c.Request.Context(), c.GetString(CtxActor), id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, job)
}

func (h *Handler) apiAudit(c *gin.Context) {
	entries, err := h.Service.Audit(c.Request.Context(), 200)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"items": entries})
}

func (h *Handler) apiStats(c *gin.Context) {
	st, err := h.Service.Stats(c.Request.Context())
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}
