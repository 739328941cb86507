// Package outbound is how callgate calls out: the platforms' query APIs
// (internal/reconcile), WeChat Pay's certificate download
// (internal/wechatcerts) and the single sign-on provider (internal/admin).
// One client setup for all of them, so that what is believed of an answer
// holds for every hop it took:
//
//   - https only; http only to a loopback address (a local simulator in
//     tests). Checked on every request, not only on the configured base.
//   - No redirect is followed. A platform's API answers where it is asked;
//     a redirect would carry the request's credentials (Stripe's secret
//     key, WeChat Pay's signed Authorization) to an address nobody
//     configured, and an answer from there would be believed as the
//     platform's. The redirect is an error naming where it pointed.
//   - Answers are limited in size below the SDKs that read them: a body
//     longer than the limit (by Content-Length, or once read) is an error,
//     not a truncated answer.
//   - A timeout on the whole exchange, as each caller had before.
package outbound

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxAnswerBytesDefault bounds an answer's body when Options.MaxAnswerBytes
// is unset: 1 MiB, far above any platform's query answer.
const MaxAnswerBytesDefault = 1 << 20

// Errors an outbound call wraps.
var (
	// ErrRedirect: the server answered with a redirect, which is not
	// followed.
	ErrRedirect = errors.New("the server answered with a redirect, which callgate does not follow")
	// ErrInsecure: the address is neither https nor http to a loopback
	// address.
	ErrInsecure = errors.New("callgate calls out over https only (http to a loopback address for a local simulator)")
	// ErrTooLarge: the answer's body is longer than the limit.
	ErrTooLarge = errors.New("the answer is longer than callgate reads")
)

// Options is one client's setup.
type Options struct {
	// Timeout bounds the whole exchange (0: none; callers set one).
	Timeout time.Duration
	// MaxAnswerBytes bounds an answer's body (0: MaxAnswerBytesDefault).
	MaxAnswerBytes int64
	// Transport is what the request goes through once checked (nil: a
	// clone of http.DefaultTransport). A caller's own round tripper (a
	// rate, a pause) wraps the client's Transport, not this.
	Transport http.RoundTripper
}

// Client returns a client with o's setup: every request checked, no
// redirect followed, every answer's body limited.
func Client(o Options) *http.Client {
	base := o.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	limit := o.MaxAnswerBytes
	if limit <= 0 {
		limit = MaxAnswerBytesDefault
	}
	return &http.Client{
		Timeout:   o.Timeout,
		Transport: guard{base: base, limit: limit},
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			return fmt.Errorf("%w (to %s)", ErrRedirect, redacted(req.URL))
		},
	}
}

// CheckURL says whether u may be called: https, or http to a loopback
// address.
func CheckURL(u *url.URL) error {
	switch {
	case u == nil || u.Host == "":
		return fmt.Errorf("%w: %q has no host", ErrInsecure, redacted(u))
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && IsLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInsecure, redacted(u))
}

// Base checks a configured API base (setting names it in the error; def is
// used when raw is blank) and returns it without a trailing slash.
func Base(setting, raw, def string) (string, error) {
	base := strings.TrimRight(strings.TrimSpace(raw), "/")
	if base == "" {
		base = def
	}
	u, err := url.ParseRequestURI(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%s %q is not a URL", setting, base)
	}
	if err := CheckURL(u); err != nil {
		return "", fmt.Errorf("%s %q: %w", setting, base, err)
	}
	return base, nil
}

// IsLoopback reports whether host names this machine.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redacted is u without credentials or query (it may carry a key).
func redacted(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// guard checks each request's address and limits each answer's body.
type guard struct {
	base  http.RoundTripper
	limit int64
}

func (g guard) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := CheckURL(r.URL); err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	res, err := g.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if res.ContentLength > g.limit {
		_ = res.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes announced, %d read at most (%s)", ErrTooLarge, res.ContentLength, g.limit, redacted(r.URL))
	}
	res.Body = &limitedBody{rc: res.Body, left: g.limit, limit: g.limit}
	return res, nil
}

// limitedBody fails a read past its limit (an answer cut short would be
// read as a different answer).
type limitedBody struct {
	rc          io.ReadCloser
	left, limit int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, b.limit)
	}
	// Read one byte past the limit to tell "exactly the limit" from "more".
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), fmt.Errorf("%w: more than %d bytes", ErrTooLarge, b.limit)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// Describe is err's text with the address of a failed call shortened to
// its scheme, host and path (a query string can carry a key, and a long
// one pushes the reason out of a column of 255 characters).
func Describe(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			msg = strings.ReplaceAll(msg, ue.URL, redacted(u))
		}
	}
	return msg
}

// Refused reports whether err is one of the client's own refusals (a
// redirect, an address not allowed, an answer too long): no answer was
// read, whatever an SDK made of the response it was handed.
func Refused(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrRedirect) || errors.Is(err, ErrInsecure) || errors.Is(err, ErrTooLarge) {
		return true
	}
	// An SDK that formats the error with %s (wechatpay-go's validator
	// reading an answer too long) keeps only its text.
	msg := err.Error()
	return strings.Contains(msg, ErrTooLarge.Error()) || strings.Contains(msg, ErrRedirect.Error())
}
