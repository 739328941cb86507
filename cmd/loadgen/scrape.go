package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp "github.com/rabbitmq/amqp091-go"
)

// metricsText is a scraped Prometheus exposition, by metric name.
type metricsText map[string]*dto.MetricFamily

var scrapeClient = &http.Client{Timeout: 5 * time.Second}

// scrape reads url's Prometheus text format.
func scrape(url string) (metricsText, error) {
	resp, err := scrapeClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	return metricsText(fams), err
}

// sum adds the values of the counters, gauges and untyped series called
// name whose labels hold every one of the given `key="value"` matchers.
func (m metricsText) sum(name string, matchers ...string) float64 {
	fam := m[name]
	if fam == nil {
		return 0
	}
	var s float64
next:
	for _, mt := range fam.GetMetric() {
		for _, want := range matchers {
			k, v, _ := strings.Cut(want, "=")
			if labelOf(mt, k) != strings.Trim(v, `"`) {
				continue next
			}
		}
		s += mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + mt.GetUntyped().GetValue()
	}
	return s
}

// labelOf is the value of mt's label name ("" when it has none).
func labelOf(mt *dto.Metric, name string) string {
	for _, l := range mt.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// isNotFound reports an AMQP 404 (a queue not declared yet).
func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}
