// Package tracing carries W3C trace context through callgate: it takes the
// traceparent a platform sent (or starts a fresh trace), hands it to the log
// lines of the request, the callback_log row and the AMQP headers, so one
// trace id follows a callback from the platform's request to the downstream
// message. Propagation uses OpenTelemetry's API; exporting spans is not this
// package's job.
package tracing

import (
	"context"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceParent is the W3C header (and AMQP header) name.
const HeaderTraceParent = "traceparent"

var propagator = propagation.TraceContext{}

// FromHeaders returns a context carrying a span context for this hop: the
// incoming trace id with a new span id, or an entirely new trace when the
// headers carry no valid traceparent.
func FromHeaders(ctx context.Context, h http.Header) context.Context {
	return childOf(ctx, propagator.Extract(ctx, propagation.HeaderCarrier(h)))
}

// FromTraceParent is FromHeaders for a bare traceparent value (from an AMQP
// header or a stored row).
func FromTraceParent(ctx context.Context, traceparent string) context.Context {
	h := http.Header{}
	if traceparent != "" {
		h.Set(HeaderTraceParent, traceparent)
	}
	return FromHeaders(ctx, h)
}

func childOf(ctx, parent context.Context) context.Context {
	psc := trace.SpanContextFromContext(parent)
	cfg := trace.SpanContextConfig{SpanID: newSpanID(), TraceFlags: trace.FlagsSampled}
	if psc.IsValid() {
		cfg.TraceID = psc.TraceID()
		cfg.TraceFlags = psc.TraceFlags()
		cfg.TraceState = psc.TraceState()
	} else {
		cfg.TraceID = newTraceID()
	}
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(cfg))
}

// TraceID returns the 32-hex trace id in ctx, or "".
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// TraceParent returns the traceparent header value for ctx, or "".
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[HeaderTraceParent]
}

func newTraceID() trace.TraceID {
	var id trace.TraceID
	for id == (trace.TraceID{}) {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for id == (trace.SpanID{}) {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// LogHandler adds trace_id to every record logged with a context that
// carries one.
type LogHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := TraceID(ctx); id != "" {
		r.AddAttrs(slog.String("trace_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return LogHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h LogHandler) WithGroup(name string) slog.Handler { return LogHandler{h.Handler.WithGroup(name)} }

// TraceParentFromID returns a traceparent continuing the stored trace id
// (32 hex) with a fresh span id, or "" when traceID is not valid.
func TraceParentFromID(traceID string) string {
	id, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ""
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: id, SpanID: newSpanID(), TraceFlags: trace.FlagsSampled})
	return TraceParent(trace.ContextWithSpanContext(context.Background(), sc))
}
