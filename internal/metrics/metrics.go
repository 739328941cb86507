// Package metrics defines callgate's Prometheus series. Each process builds
// one Metrics on its own registry (so tests can run several in one binary)
// and serves it on GET /metrics.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is the file's metrics section.
type Config struct {
	// Public serves the gateway's /metrics on its public listener when
	// there is no http.admin_addr (with one, /metrics is there, for
	// operators only). Off by default: the series name sources, queues
	// and failure reasons nobody outside needs to see. Env
	// CALLGATE_METRICS_PUBLIC=1.
	Public bool `yaml:"public"`
}

// Metrics holds every series.
type Metrics struct {
	Registry *prometheus.Registry
	process  string

	IntakeRequests *prometheus.CounterVec   // source, result
	IntakeDuration *prometheus.HistogramVec // source
	// DeadLetters counts the notifications stored though their preset
	// could not read them, DeadLettersRefused the requests answered 429
	// for holding new ones past the source's dead_letters limit.
	DeadLetters        *prometheus.CounterVec // source
	DeadLettersRefused *prometheus.CounterVec // source

	Processed          *prometheus.CounterVec   // kind, outcome: success, retry, failed, deferred, skipped
	ProcessingDuration *prometheus.HistogramVec // kind
	Attempts           *prometheus.CounterVec   // kind
	Retries            *prometheus.CounterVec   // kind
	FailedTransitions  *prometheus.CounterVec   // kind
	FailedReasons      *prometheus.CounterVec   // kind, reason: the handler's code (order_not_found, ...) or other
	TransactionRetries *prometheus.CounterVec   // kind, reason: deadlock, lock_wait_timeout
	BatchSizes         prometheus.Histogram     // callbacks per batch transaction
	BatchFallbacks     *prometheus.CounterVec   // reason: handler, transaction

	OutboxPublished *prometheus.CounterVec // path: fast, relay
	OutboxPending   prometheus.Gauge
	RelayLag        prometheus.Gauge // age of the oldest PENDING outbox row, seconds
	// DownstreamUnrouted is the depth of <prefix>.downstream.unrouted.
	DownstreamUnrouted prometheus.Gauge
	// DownstreamUnroutedLimit is that queue's bound (amqp.unrouted_max_length).
	DownstreamUnroutedLimit prometheus.Gauge

	BacklogPending   *prometheus.GaugeVec // source
	BacklogOldestAge *prometheus.GaugeVec // source, seconds
	FailedCallbacks  *prometheus.GaugeVec // source

	BrokerReconnects prometheus.Counter
	JobRuns          *prometheus.CounterVec // job
	SchedulerLeader  prometheus.Gauge
	Replayed         *prometheus.CounterVec // mode: single, bulk

	// PaymentExceptions counts the payment.exception notifications
	// committed, by kind (paid_by_another, amount_mismatch, ...).
	PaymentExceptions *prometheus.CounterVec
	// Refunds counts the refunds whose outcome a committed notification
	// told: succeeded (order.refunded), failed (order.refund_failed: a
	// refund that failed or was reversed).
	Refunds *prometheus.CounterVec
	// ReconcileQueries counts the queries reconciliation made, by source
	// and outcome (found, nothing, bad_signature, refused, unreachable,
	// not_ours, store_failed); ReconcileFound the callbacks their answers
	// stored, by kind (paid, closed, failed, refund); ReconcileGaveUp
	// the orders given up on (unresolved).
	ReconcileQueries *prometheus.CounterVec
	ReconcileFound   *prometheus.CounterVec
	ReconcileGaveUp  *prometheus.CounterVec
	// ReconcilePaused and ReconcileCircuitOpen are 1 while a source is
	// paused (its platform said 429 or 503) or its circuit open (queries
	// in a row reached no answer); ReconcileCircuitOpened counts openings.
	ReconcilePaused        *prometheus.GaugeVec
	ReconcileCircuitOpen   *prometheus.GaugeVec
	ReconcileCircuitOpened *prometheus.CounterVec
	// WeChatPayCertRefreshes counts the downloads of WeChat Pay's
	// platform certificates (/v3/certificates), by source and outcome
	// (ok, unreachable, refused, bad_signature, invalid);
	// WeChatPayCertsHeld is the number of platform certificates a source
	// verifies with (configured, and downloaded not expired).
	WeChatPayCertRefreshes *prometheus.CounterVec
	WeChatPayCertsHeld     *prometheus.GaugeVec
}

// New builds the series on a fresh registry, with Go and process collectors.
func New(process string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	constLabels := prometheus.Labels{"process": process}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "callgate", Name: name, Help: help, ConstLabels: constLabels}, labels)
		f(c)
		return c
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "callgate", Name: name, Help: help, ConstLabels: constLabels}, labels)
		f(g)
		return g
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "callgate", Name: name, Help: help, ConstLabels: constLabels})
		f(g)
		return g
	}
	hist := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "callgate", Name: name, Help: help, Buckets: buckets, ConstLabels: constLabels}, labels)
		f(h)
		return h
	}
	m := &Metrics{Registry: reg, process: process}
	m.IntakeRequests = counter("intake_requests_total", "Callback requests by source and result.", "source", "result")
	m.IntakeDuration = hist("intake_duration_seconds", "Time to answer a callback request.",
		[]float64{.001, .0025, .005, .01, .02, .03, .05, .1, .25, .5, 1, 2.5}, "source")
	m.DeadLetters = counter("dead_letters_total",
		"Notifications stored though their source's preset could not read them (signed and ours; FAILED by the worker until a replay reads them), by source.", "source")
	m.DeadLettersRefused = counter("dead_letters_refused_total",
		"Requests answered 429, nothing stored, because they held notifications their source's preset could not read past its dead_letters limit, by source.", "source")
	m.Processed = counter("callbacks_processed_total", "Callbacks handled by the worker, by kind and outcome.", "kind", "outcome")
	m.ProcessingDuration = hist("processing_duration_seconds", "Time to process one callback (transaction and outbox).",
		[]float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "kind")
	m.Attempts = counter("callback_attempts_total", "Processing attempts recorded.", "kind")
	m.Retries = counter("callback_retries_total", "Attempts that failed and will be retried.", "kind")
	m.FailedTransitions = counter("callback_failed_total", "Callbacks that went to FAILED.", "kind")
	m.FailedReasons = counter("callback_failed_reasons_total",
		"Callbacks that went to FAILED, by the reason their handler named (order_not_found, ambiguous_payment, no_currency, ...; other when it named none).", "kind", "reason")
	m.BatchSizes = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "callgate", Name: "batch_size",
		Help: "Callbacks claimed per batch transaction.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}, ConstLabels: constLabels})
	f(m.BatchSizes)
	m.BatchFallbacks = counter("batch_fallbacks_total",
		"Batch transactions rolled back whose callbacks then ran one by one, by reason (a handler failed, or the transaction did).", "reason")
	m.TransactionRetries = counter("transaction_retries_total",
		"Processing transactions run again at once after a deadlock or lock wait timeout (not counted as attempts).", "kind", "reason")
	m.OutboxPublished = counter("outbox_published_total", "Outbox rows published and confirmed, by path (fast, relay).", "path")
	m.OutboxPending = gauge("outbox_pending", "PENDING outbox rows.")
	m.RelayLag = gauge("outbox_relay_lag_seconds", "Age of the oldest PENDING outbox row.")
	m.DownstreamUnrouted = gauge("downstream_unrouted_messages",
		"Notifications waiting in <prefix>.downstream.unrouted: published with a routing key no queue was bound for, kept for an operator.")
	m.DownstreamUnroutedLimit = gauge("downstream_unrouted_limit_messages",
		"The bound of <prefix>.downstream.unrouted (amqp.unrouted_max_length): past it the oldest parked notification is dropped.")
	m.BacklogPending = gaugeVec("backlog_pending", "PENDING callbacks by source.", "source")
	m.BacklogOldestAge = gaugeVec("backlog_oldest_pending_age_seconds", "Age of the oldest PENDING callback by source.", "source")
	m.FailedCallbacks = gaugeVec("failed_callbacks", "FAILED callbacks by source.", "source")
	m.BrokerReconnects = counter("broker_reconnects_total", "Reconnections to RabbitMQ after a lost connection.").WithLabelValues()
	m.JobRuns = counter("scheduler_job_runs_total", "Scheduled job runs on this instance.", "job")
	m.SchedulerLeader = gauge("scheduler_leader", "1 while this instance holds the scheduler lease.")
	m.Replayed = counter("replayed_total", "Callbacks replayed by operators.", "mode")
	m.PaymentExceptions = counter("payment_exceptions_total",
		"Money that needs a person, as published in payment.exception notifications, by kind (paid_by_another, amount_mismatch, currency_mismatch, over_refund, reversal_of_paying_payment, paid_after_close).", "kind")
	m.Refunds = counter("refunds_total", "Refunds counted (succeeded) or uncounted and failed (failed: it failed or was reversed), as published downstream.", "outcome")
	m.ReconcileQueries = counter("reconcile_queries_total", "Reconciliation's queries to the platforms, by source and outcome.", "source", "outcome")
	m.ReconcileFound = counter("reconcile_found_total",
		"Callbacks reconciliation stored from a platform's answer (something no notification brought), by source and kind.", "source", "kind")
	m.ReconcileGaveUp = counter("reconcile_gave_up_total", "Orders reconciliation gave up on, still UNPAID or FAILED (unresolved), by source.", "source")
	m.ReconcilePaused = gaugeVec("reconcile_paused",
		"1 while reconciliation leaves a source's platform alone because it answered 429 or 503 (until its Retry-After, capped), by source.", "source")
	m.ReconcileCircuitOpen = gaugeVec("reconcile_circuit_open",
		"1 while a source's reconciliation circuit is open: queries in a row reached no answer (timeouts), nothing is asked until it closes, by source.", "source")
	m.ReconcileCircuitOpened = counter("reconcile_circuit_opened_total", "Times a source's reconciliation circuit opened, by source.", "source")
	m.WeChatPayCertRefreshes = counter("wechatpay_certificates_refresh_total",
		"Downloads of WeChat Pay's platform certificates (/v3/certificates), by source and outcome (ok, unreachable, refused, bad_signature, invalid); a failed one keeps the certificates held.", "source", "outcome")
	m.WeChatPayCertsHeld = gaugeVec("wechatpay_certificates_held",
		"WeChat Pay platform certificates a source verifies with: the configured ones and the downloaded ones not expired.", "source")
	return m
}

// ObserveAnnouncer exports an announcer's counters as
// callgate_announcements_total{result}.
func (m *Metrics) ObserveAnnouncer(published, dropped, nacked func() int64) {
	for result, f := range map[string]func() int64{"published": published, "dropped": dropped, "nacked": nacked} {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "callgate", Name: "announcements_total",
			Help:        "Log id announcements by result (published = confirmed by the broker; dropped = buffer full, left to compensation; nacked = not confirmed or returned unroutable, published again).",
			ConstLabels: prometheus.Labels{"result": result, "process": m.process},
		}, func() float64 { return float64(f()) }))
	}
}

// ObserveReplica exports, with mysql.durability: replica, whether a
// replica acknowledges the primary's commits (1), or not (0: the intake
// answers 503), as callgate_mysql_replica_acknowledging, and how many
// replicas are connected as semi-sync clients.
func (m *Metrics) ObserveReplica(acknowledging, clients func() float64) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "callgate", Name: "mysql_replica_acknowledging",
		Help:        "With mysql.durability: replica, 1 while a replica acknowledges the primary's commits (semi-sync on), 0 while none does and callbacks are answered 503.",
		ConstLabels: prometheus.Labels{"process": m.process},
	}, acknowledging))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "callgate", Name: "mysql_semisync_replicas",
		Help:        "With mysql.durability: replica, the replicas connected to the primary as semi-sync clients (Rpl_semi_sync_master_clients).",
		ConstLabels: prometheus.Labels{"process": m.process},
	}, clients))
}

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Since returns seconds since t, for histograms.
func Since(t time.Time) float64 { return time.Since(t).Seconds() }
