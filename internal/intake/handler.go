package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/callback"
	"callgate/internal/ingest"
	"callgate/internal/metrics"
	"callgate/internal/platform"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// EventChecker says why the worker's handler of kind could not read body
// as its event (callback.Registry.CheckEvent).
type EventChecker interface {
	CheckEvent(kind string, body []byte) error
}

// Handler serves POST /callbacks/:source.
type Handler struct {
	Sources map[string]*Source
	// Disabled are the configured sources left out (they answer 404 "not
	// enabled on this gateway"), with why (NewSources); a request to one
	// is logged with the reason, at most once a minute per source.
	Disabled map[string]string
	// Store stores and announces (ingest.OneByOne, or the group-commit
	// store.Batcher with ingest.AnnounceNew).
	Store ingest.Inserter
	// Events reads a configured JSON source's body as its kind's handler
	// will, before it is stored: a field of the wrong type is a 400
	// naming it. Nil: not checked (the worker fails such a callback).
	Events EventChecker
	Log    *slog.Logger
	// StoreTimeout bounds the INSERT; past it the platform gets a 503.
	StoreTimeout time.Duration
	// ReannounceAfter sets next_attempt_at: if no worker has processed the
	// callback by then, the compensation job announces it again.
	ReannounceAfter time.Duration
	// Now is the clock (tests set it).
	Now     func() time.Time
	Metrics *metrics.Metrics
	// DeadLetters bounds each preset source's new dead letters per hour
	// (deadletters.go); nil: no bound.
	DeadLetters *DeadLetters

	disabled disabledLog
}

// Error reasons a caller sees. They name the problem, never internals.
const (
	reasonTooLarge      = "body exceeds the size limit of this source"
	reasonUnreadable    = "could not read the request body"
	reasonUnavailable   = "storage temporarily unavailable, please retry"
	reasonNotReplicated = "not yet stored on two servers (database replica unavailable), please retry"
	reasonForbidden     = "this address may not call this source"
	reasonRateLimited   = "rate limit exceeded for this source, retry later"
	reasonContentType   = "unsupported content type for this source"
)

// Callback handles POST /callbacks/:source.
func (h *Handler) Callback(c *gin.Context) {
	start := time.Now()
	defer func() {
		src := c.Param("source")
		if _, known := h.Sources[src]; !known {
			src = "unknown" // never a label per attacker-chosen name
		}
		h.Metrics.IntakeRequests.WithLabelValues(src, resultOf(c.Writer.Status(), c.GetBool(ctxDuplicate))).Inc()
		h.Metrics.IntakeDuration.WithLabelValues(src).Observe(metrics.Since(start))
	}()
	ctx := c.Request.Context()
	src, ok := h.Sources[c.Param("source")]
	if !ok {
		if why, off := h.Disabled[c.Param("source")]; off {
			h.refuseDisabled(c, c.Param("source"), why)
			return
		}
		h.refuse(c, nil, http.StatusNotFound, unknownSource(c.Param("source")), nil)
		return
	}
	// Cheap refusals first: no body read, no HMAC, no database.
	if !src.allowed(c.Request.RemoteAddr) {
		h.refuse(c, src, http.StatusForbidden, reasonForbidden, nil)
		return
	}
	if !src.contentTypeOK(c.GetHeader("Content-Type")) {
		h.refuse(c, src, http.StatusUnsupportedMediaType, reasonContentType, nil)
		return
	}
	limit := src.Config.MaxBodyBytes
	if c.Request.ContentLength > limit {
		h.refuse(c, src, http.StatusRequestEntityTooLarge, reasonTooLarge, nil)
		return
	}
	body, err := readBody(c.Request.Body, limit)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.refuse(c, src, http.StatusRequestEntityTooLarge, reasonTooLarge, nil)
			return
		}
		h.refuse(c, src, http.StatusBadRequest, reasonUnreadable, err)
		return
	}

	// The signature is checked before the body is parsed or the database
	// touched: a forged request costs one HMAC.
	now := h.Now()
	if src.Platform != nil {
		h.presetCallback(c, src, body, now)
		return
	}
	verified, err := src.Verifier.Verify(c.Request.Header, body, now)
	if err != nil {
		h.refuse(c, src, http.StatusUnauthorized, "invalid signature: "+err.Error(), nil)
		return
	}
	if h.overLimit(c, src) {
		return
	}
	if err := callback.CheckJSONShape(body); err != nil {
		h.refuse(c, src, http.StatusBadRequest, err.Error(), nil)
		return
	}
	// One reader: a key given twice, or in two cases, could say one
	// thing to the extractor and another to the handler.
	if err := callback.CheckJSONKeys(body); err != nil {
		h.refuse(c, src, http.StatusBadRequest, err.Error(), nil)
		return
	}
	schemeID := verified.EventID
	if src.Config.EventID.BodyDigest {
		schemeID = callback.BodyDigest(body)
	}
	if name := src.Config.EventID.Header; name != "" {
		if schemeID = strings.TrimSpace(c.GetHeader(name)); schemeID == "" {
			h.refuse(c, src, http.StatusBadRequest, "header "+name+" (the event id) is missing", nil)
			return
		}
	}
	eventID, key, err := src.Extractor.Extract(body, schemeID)
	if err != nil {
		h.refuse(c, src, http.StatusBadRequest, err.Error(), nil)
		return
	}
	// Types as well as presence: a field the handler could never read is
	// the sender's mistake, told now rather than FAILED later.
	if h.Events != nil {
		if err := h.Events.CheckEvent(src.Config.Kind, body); err != nil {
			h.refuse(c, src, http.StatusBadRequest, err.Error(), nil)
			return
		}
	}

	row := h.newRow(c, src, eventID, key, body, now)
	sctx, cancel := context.WithTimeout(ctx, h.StoreTimeout)
	stored, err := ingest.InsertAll(sctx, h.Store, []*callback.Log{row})
	cancel()
	if err != nil {
		h.storeFailed(c, src, err)
		return
	}
	// Committed, and announced by the inserter (queued, never awaited: if
	// the broker is slow or down the row stays PENDING and compensation
	// announces it).
	c.Set(ctxDuplicate, stored[0].Duplicate)
	h.succeed(c, src, stored[0], eventID)
}

// unknownSource is the answer to a request for a source no config names.
// It names what the request asked for (shortened, quoted): a sender who
// mistyped the URL sees what the gateway read. It is the request's own
// text, in a JSON string, and tells nothing of the config.
func unknownSource(name string) string {
	return fmt.Sprintf("unknown source %q", callback.Truncate(name, 64))
}

// storeFailed answers 503 for an insert that did not count as accepted:
// the database away or slow, or (mysql.durability: replica) no replica
// known to hold the row. The platform retries; nothing is lost.
func (h *Handler) storeFailed(c *gin.Context, src *Source, err error) {
	reason := reasonUnavailable
	if errors.Is(err, store.ErrNotReplicated) {
		reason = reasonNotReplicated
	}
	h.refuse(c, src, http.StatusServiceUnavailable, reason, err)
}

// overLimit charges one verified request to the source's rate limit and,
// past it, answers 429 with Retry-After. Only requests whose signature
// holds are counted: unsigned traffic cannot use up a platform's budget
// and get its genuine callbacks refused.
func (h *Handler) overLimit(c *gin.Context, src *Source) bool {
	if src.limiter == nil {
		return false
	}
	r := src.limiter.Reserve()
	if r.Delay() <= 0 {
		return false
	}
	r.Cancel()
	c.Header("Retry-After", strconv.Itoa(max(1, int(math.Ceil(r.Delay().Seconds())))))
	h.refuse(c, src, http.StatusTooManyRequests, reasonRateLimited, nil)
	return true
}

const ctxDuplicate = "callgate.duplicate"

// results name the answers in callgate_intake_requests_total{result}.
var results = map[int]string{
	http.StatusOK:                    "accepted",
	http.StatusBadRequest:            "bad_request",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "unknown_source",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusTooManyRequests:       "rate_limited",
	http.StatusServiceUnavailable:    "unavailable",
}

// resultOf names an answer for callgate_intake_requests_total.
func resultOf(status int, duplicate bool) string {
	if status >= 200 && status < 300 {
		// A preset answers in the platform's words (WeChat Pay: 204).
		if duplicate {
			return "duplicate"
		}
		return "accepted"
	}
	if r, ok := results[status]; ok {
		return r
	}
	return strconv.Itoa(status)
}

func readBody(r io.Reader, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	// MaxBytesReader errors as soon as one byte more than limit arrives,
	// so a lying Content-Length or a chunked body cannot exceed it.
	_, err := buf.ReadFrom(http.MaxBytesReader(nil, io.NopCloser(r), limit))
	return buf.Bytes(), err
}

func (h *Handler) succeed(c *gin.Context, src *Source, res platform.Stored, eventID string) {
	if src.body == nil {
		b := make([]byte, 0, 64)
		b = append(b, `{"status":"accepted","log_id":`...)
		b = strconv.AppendInt(b, res.LogID, 10)
		b = append(b, `,"duplicate":`...)
		b = strconv.AppendBool(b, res.Duplicate)
		b = append(b, '}')
		c.Data(http.StatusOK, src.Config.Response.ContentType, b)
		return
	}
	var out bytes.Buffer
	err := src.body.Execute(&out, struct {
		LogID     int64
		Duplicate bool
		EventID   string
	}{res.LogID, res.Duplicate, eventID})
	if err != nil {
		// The row is stored; a broken template must not make the platform
		// resend. Fall back to the default body.
		h.Log.ErrorContext(c.Request.Context(), "intake: response template failed", "source", src.Config.Name, "error", err)
		src = &Source{Config: src.Config}
		h.succeed(c, src, res, eventID)
		return
	}
	c.Data(http.StatusOK, src.Config.Response.ContentType, out.Bytes())
}

// newRow is the PENDING callback_log row of one callback.
func (h *Handler) newRow(c *gin.Context, src *Source, eventID, key string, body []byte, now time.Time) *callback.Log {
	row := &callback.Log{
		Source:      src.Config.Name,
		Kind:        src.Config.Kind,
		EventID:     eventID,
		BusinessKey: key,
		Status:      callback.StatusPending,
		Payload:     body,
		Headers:     ingest.StoredHeaders(c.Request.Header, src.stored),
		TraceID:     tracing.TraceID(c.Request.Context()),
		ReceivedAt:  now.UTC().Truncate(time.Microsecond), // as stored
	}
	due := row.ReceivedAt.Add(h.ReannounceAfter)
	row.NextAttemptAt = &due
	return row
}

// refuse answers a refused request: {"error": reason}, or a preset's
// failure answer in the platform's words; the log line carries the detail
// and the trace id.
func (h *Handler) refuse(c *gin.Context, src *Source, status int, reason string, cause error) {
	ctx := c.Request.Context()
	attrs := []any{"status", status, "source", c.Param("source"), "reason", reason}
	if cause != nil {
		attrs = append(attrs, "error", cause.Error())
	}
	if status >= 500 {
		h.Log.ErrorContext(ctx, "intake: request refused", attrs...)
	} else {
		h.Log.WarnContext(ctx, "intake: request refused", attrs...)
	}
	if src == nil || src.Platform == nil {
		WriteError(c, status, reason)
		return
	}
	write(c, src.Platform.Refused(status, reason))
	c.Abort()
}

// write sends a preset's answer.
func write(c *gin.Context, a platform.Answer) {
	if len(a.Body) == 0 {
		c.Status(a.Status)
		c.Writer.WriteHeaderNow()
		return
	}
	c.Data(a.Status, a.ContentType, a.Body)
}

// WriteError writes the JSON error body every endpoint uses.
func WriteError(c *gin.Context, status int, reason string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{reason})
	c.Data(status, "application/json", b)
	c.Abort()
}
