package worker

import (
	"encoding/json"

	"callgate/internal/outbox"
)

// The notifications on-call counts once they are committed (a batch that
// rolled back counts nothing): the routing keys are the downstream
// contract's (internal/downstream/asyncapi.yaml), named here as strings so
// that the worker stays free of any one handler.
const (
	notePaymentException = "payment.exception"
	noteOrderRefunded    = "order.refunded"
	noteRefundFailed     = "order.refund_failed"
)

// countNotifications counts committed outbox rows into
// callgate_payment_exceptions_total{kind} and callgate_refunds_total{outcome}.
func (p *Processor) countNotifications(rows []outbox.Row) {
	for i := range rows {
		switch rows[i].RoutingKey {
		case notePaymentException:
			var ex struct {
				Kind string `json:"kind"`
			}
			if json.Unmarshal(rows[i].Payload, &ex) == nil && ex.Kind != "" {
				p.Metrics.PaymentExceptions.WithLabelValues(ex.Kind).Inc()
			}
		case noteOrderRefunded:
			p.Metrics.Refunds.WithLabelValues("succeeded").Inc()
		case noteRefundFailed:
			p.Metrics.Refunds.WithLabelValues("failed").Inc()
		}
	}
}
