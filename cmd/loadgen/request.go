package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"callgate/internal/signature"
)

// callbackGen builds the distinct, correctly signed paydemo callbacks of one
// phase: event id "<tag>-<run>-<n>", order n, ~payloadBytes of JSON.
type callbackGen struct {
	url          string
	secret       string
	tag          string // event-id prefix of the phase
	runID        string
	payloadBytes int
	orders       int // order n%orders is paid; 0: order n
}

func (g *callbackGen) eventPrefix() string { return g.tag + "-" + g.runID + "-" }

func (g *callbackGen) eventID(n int) string { return g.eventPrefix() + strconv.Itoa(n) }

// body is the n-th payload, padded with "note" to payloadBytes.
func (g *callbackGen) body(n int, now time.Time) []byte {
	order := n
	if g.orders > 0 {
		order = n % g.orders
	}
	b := make([]byte, 0, g.payloadBytes+16)
	b = append(b, `{"orderCode":"`...)
	b = append(b, orderCode(order)...)
	b = append(b, `","paymentNo":"PAY-`...)
	b = append(b, g.eventID(n)...)
	b = append(b, `","amount":`...)
	b = strconv.AppendInt(b, orderAmount(order), 10)
	b = append(b, `,"status":"SUCCESS","paidAt":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339)
	b = append(b, `","note":"`...)
	if pad := g.payloadBytes - len(b) - 2; pad > 0 {
		b = append(b, strings.Repeat("x", pad)...)
	}
	b = append(b, `"}`...)
	return b
}

// request is the n-th callback, signed now.
func (g *callbackGen) request(n int) (*http.Request, error) {
	now := time.Now()
	body := g.body(n, now)
	id := g.eventID(n)
	sig, err := signature.SignStandardWebhooks(g.secret, id, now, body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, g.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["User-Agent"] = []string{"callgate-loadgen"}
	req.Header["Webhook-Id"] = []string{id}
	req.Header["Webhook-Timestamp"] = []string{strconv.FormatInt(now.Unix(), 10)}
	req.Header["Webhook-Signature"] = []string{sig}
	return req, nil
}

// outcome of one request.
type outcome uint8

const (
	outAccepted  outcome = iota // 200, duplicate false
	outDuplicate                // 200, duplicate true (never expected: every event id is new)
	outNon2xx                   // any other status
	outTransport                // no answer (connection error, timeout)
)

// do sends req and classifies the answer; for a 200 it also returns the
// log id the gateway answered (0 if the body carries none).
func do(cl *http.Client, req *http.Request) (outcome, int64, error) {
	resp, err := cl.Do(req)
	if err != nil {
		return outTransport, 0, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if err != nil {
		return outTransport, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return outNon2xx, 0, fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	id, dup, ok := parseAccepted(body)
	switch {
	case !ok:
		return outNon2xx, 0, fmt.Errorf("200 with an unexpected body: %s", bytes.TrimSpace(body))
	case dup:
		return outDuplicate, id, nil
	default:
		return outAccepted, id, nil
	}
}

// parseAccepted reads the intake's default answer,
// {"status":"accepted","log_id":N,"duplicate":false}: ok is false when the
// duplicate flag is missing, id 0 when the log id is.
func parseAccepted(body []byte) (id int64, duplicate, ok bool) {
	switch {
	case bytes.Contains(body, []byte(`"duplicate":true`)):
		duplicate = true
	case !bytes.Contains(body, []byte(`"duplicate":false`)):
		return 0, false, false
	}
	const key = `"log_id":`
	if i := bytes.Index(body, []byte(key)); i >= 0 {
		rest := body[i+len(key):]
		end := 0
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
		}
		id, _ = strconv.ParseInt(string(rest[:end]), 10, 64)
	}
	return id, duplicate, true
}

// newTransport is a keep-alive transport to the gateway holding at most
// conns connections.
func newTransport(conns int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}
