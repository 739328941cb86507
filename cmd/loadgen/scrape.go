package main

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// metricsText is a scraped Prometheus text exposition.
type metricsText []metricLine

type metricLine struct {
	name   string
	labels string
	value  float64
}

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
	var out metricsText
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		series := line[:i]
		name, labels := series, ""
		if j := strings.IndexByte(series, '{'); j >= 0 {
			name, labels = series[:j], series[j:]
		}
		out = append(out, metricLine{name: name, labels: labels, value: v})
	}
	return out, sc.Err()
}

// sum adds the values of the series called name whose labels contain every
// one of the given `key="value"` matchers.
func (m metricsText) sum(name string, matchers ...string) float64 {
	var s float64
next:
	for _, l := range m {
		if l.name != name {
			continue
		}
		for _, mt := range matchers {
			if !strings.Contains(l.labels, mt) {
				continue next
			}
		}
		s += l.value
	}
	return s
}

// isNotFound reports an AMQP 404 (a queue not declared yet).
func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}
