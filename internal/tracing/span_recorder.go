package tracing

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// SpanRecorder, when set up, records spans (the intake request, the
// processing of a callback) and ships them over OTLP/HTTP. It is off by
// default: without it the trace context still travels, but no span is
// recorded.
type SpanRecorder struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// NewSpanRecorder records spans and ships them to endpoint (e.g. http://otel-collector:4318),
// naming the process service. An empty endpoint returns nil: off.
func NewSpanRecorder(ctx context.Context, endpoint, service string) (*SpanRecorder, error) {
	if endpoint == "" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("error creating OTLP exporter: %w", err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(service))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)
	return &SpanRecorder{tp: tp, tracer: tp.Tracer("callgate")}, nil
}

// Shutdown flushes and stops the exporter.
func (e *SpanRecorder) Shutdown(ctx context.Context) error {
	if e == nil {
		return nil
	}
	return e.tp.Shutdown(ctx)
}

// StartRequest begins the span of an incoming request: its context carries
// the platform's trace (or a new one) and a new span id. end finishes the
// span (a no-op when e is nil).
func (e *SpanRecorder) StartRequest(ctx context.Context, h http.Header, name string) (context.Context, func()) {
	if e == nil {
		return FromHeaders(ctx, h), func() {}
	}
	parent := propagator.Extract(ctx, propagation.HeaderCarrier(h))
	ctx, span := e.tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindServer))
	return ctx, func() { span.End() }
}

// StartFromTraceParent begins a span continuing a stored or carried trace.
func (e *SpanRecorder) StartFromTraceParent(ctx context.Context, traceparent, name string) (context.Context, func()) {
	if e == nil {
		return FromTraceParent(ctx, traceparent), func() {}
	}
	h := http.Header{}
	if traceparent != "" {
		h.Set(HeaderTraceParent, traceparent)
	}
	parent := propagator.Extract(ctx, propagation.HeaderCarrier(h))
	ctx, span := e.tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindConsumer))
	return ctx, func() { span.End() }
}

// Config configures span export: the file's tracing section. The trace
// context travels either way.
type Config struct {
	// OTLPEndpoint (e.g. http://otel-collector:4318) switches span export
	// over OTLP/HTTP on. Default "": off.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
}
