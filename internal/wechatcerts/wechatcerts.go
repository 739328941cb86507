// Package wechatcerts renews a wechatpay-v3 source's platform
// certificates: at start and every 12 hours it downloads WeChat Pay's
// GET /v3/certificates, signed as the merchant, and hands the preset the
// certificates it lists that are not expired (platform.PlatformCertificates),
// so a certificate rotation does not refuse every notification until
// someone edits the configuration.
//
// The request goes through WeChat Pay's own Go SDK
// (github.com/wechatpay-apiv3/wechatpay-go): its client signs it
// (WECHATPAY2-SHA256-RSA2048 with the merchant's API private key) and its
// validator checks the answer's Wechatpay-Timestamp and
// Wechatpay-Signature, by the keys the source already trusts (the
// configured ones and the certificates of earlier downloads), never by a
// certificate of the answer itself. Each certificate is decrypted with the
// APIv3 key (utils.DecryptAES256GCM) and must carry the serial the answer
// gives it. The SDK's own core/downloader is not used: its URL is fixed to
// api.mch.weixin.qq.com, its first download verifies nothing (a
// NullValidator), it keeps expired certificates and does not check the
// serials.
//
// A download that fails (unreachable, refused, a signature that does not
// hold, an answer that does not decrypt or lists no valid certificate)
// changes nothing: the certificates held stay, a WARN says why, the
// outcome is counted (callgate_wechatpay_certificates_refresh_total), and
// the next try is sooner than the interval.
package wechatcerts

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"callgate/internal/metrics"
	"callgate/internal/platform"
	"callgate/internal/signature"
	"callgate/internal/source"
)

const (
	// DefaultInterval is how often the certificates are downloaded.
	DefaultInterval = 12 * time.Hour
	// retryAfter bounds the wait after a failed download.
	retryAfter = 30 * time.Minute
	// apiBase is WECHATPAY_API_BASE's default (as internal/reconcile's).
	apiBase = "https://api.mch.weixin.qq.com"
	// downloadTimeout bounds one download.
	downloadTimeout = 30 * time.Second
	// maxAnswerBytes bounds the answer read.
	maxAnswerBytes = 1 << 20
	preset         = "wechatpay-v3"
)

// The outcomes counted in callgate_wechatpay_certificates_refresh_total.
const (
	OutcomeOK           = "ok"
	OutcomeUnreachable  = "unreachable"
	OutcomeRefused      = "refused"
	OutcomeBadSignature = "bad_signature"
	OutcomeInvalid      = "invalid"
)

// Refresher downloads one source's platform certificates.
type Refresher struct {
	Source   string
	Certs    platform.PlatformCertificates
	Interval time.Duration
	Log      *slog.Logger
	Metrics  *metrics.Metrics // nil: not counted
	Now      func() time.Time

	client   *core.Client
	url      string
	apiv3Key string
}

// New builds the refresher of source s, whose preset is certs, from its
// merchant credentials (reconcile.private_key_file, reconcile.serial,
// reconcile.api_base, platform.mchid, platform.apiv3_key). It asks nothing
// yet. hc nil: a client with a 30 s timeout.
func New(ctx context.Context, s source.Config, certs platform.PlatformCertificates, hc *http.Client) (*Refresher, error) {
	rc := s.Reconcile
	if s.Platform.MchID == "" || rc.PrivateKeyFile == "" || rc.Serial == "" {
		return nil, errors.New("renewing the platform certificates needs platform.mchid, reconcile.private_key_file and reconcile.serial")
	}
	key, err := utils.LoadPrivateKeyWithPath(rc.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("reconcile.private_key_file (WECHATPAY_MCH_PRIVATE_KEY_FILE): %w", err)
	}
	base := strings.TrimRight(rc.APIBase, "/")
	if base == "" {
		base = apiBase
	}
	if _, err := url.ParseRequestURI(base); err != nil {
		return nil, fmt.Errorf("reconcile.api_base (WECHATPAY_API_BASE): %w", err)
	}
	if hc == nil {
		hc = &http.Client{Timeout: downloadTimeout}
	}
	client, err := core.NewClient(ctx,
		option.WithMerchantCredential(s.Platform.MchID, rc.Serial, key),
		option.WithVerifier(trusted{certs}),
		option.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("WeChat Pay client: %w", err)
	}
	interval := rc.CertificatesRefresh
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Refresher{Source: s.Name, Certs: certs, Interval: interval, Log: slog.Default(), Now: time.Now,
		client: client, url: base + "/v3/certificates", apiv3Key: s.Platform.APIv3Key}, nil
}

// Start builds and runs, until ctx ends, a refresher for each enabled
// wechatpay-v3 source of presets (by source name) that verifies with
// platform certificates and has the merchant's credentials; a source with
// certificates and no credentials is logged as not renewed. Nothing waits
// for WeChat Pay: the first download runs in the background. A credential
// that cannot be read stops the start, naming its field.
func Start(ctx context.Context, sources []source.Config, presets map[string]platform.Platform, log *slog.Logger, m *metrics.Metrics) ([]*Refresher, error) {
	var out []*Refresher
	for i, s := range sources {
		if s.Preset != preset || presets[s.Name] == nil {
			continue
		}
		certs, ok := presets[s.Name].(platform.PlatformCertificates)
		if !ok || !certs.UsesCertificates() {
			continue
		}
		if s.Reconcile.PrivateKeyFile == "" || s.Reconcile.Serial == "" {
			log.Info("wechatpay: platform certificates are not renewed (only the configured ones verify): WECHATPAY_MCH_PRIVATE_KEY_FILE and WECHATPAY_MCH_SERIAL not set",
				"source", s.Name)
			continue
		}
		r, err := New(ctx, s, certs, nil)
		if err != nil {
			return nil, fmt.Errorf("sources[%d] (%s): %w", i, s.Name, err)
		}
		r.Log, r.Metrics = log, m
		log.Info("wechatpay: platform certificates renewed from /v3/certificates", "source", s.Name, "every", r.Interval.String(), "url", r.url)
		out = append(out, r)
		go r.Run(ctx)
	}
	return out, nil
}

// Run downloads now, then every Interval (after a failure, within
// retryAfter), until ctx ends.
func (r *Refresher) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wait := r.Interval
		if err := r.Refresh(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = min(r.Interval, retryAfter)
		}
		t.Reset(wait)
	}
}

// Error is a failed download and its outcome.
type Error struct {
	Outcome string
	Err     error
}

func (e *Error) Error() string { return e.Outcome + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Refresh downloads the certificates once and, when the answer holds,
// hands the preset the unexpired ones. A failure (an *Error) keeps the
// certificates held.
func (r *Refresher) Refresh(ctx context.Context) error {
	now := r.Now()
	certs, err := r.download(ctx, now)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Outcome: OutcomeInvalid, Err: err}
		}
		held := r.Certs.HeldCertificates(now)
		r.count(e.Outcome, len(held))
		r.Log.Warn("wechatpay: platform certificates not renewed; the certificates held stay",
			"source", r.Source, "outcome", e.Outcome, "reason", e.Err.Error(), "held", strings.Join(held, ","))
		return e
	}
	n, skipped := r.Certs.SetDownloadedCertificates(certs, now)
	held := r.Certs.HeldCertificates(now)
	r.count(OutcomeOK, n)
	attrs := []any{"source", r.Source, "held", strings.Join(held, ",")}
	if len(skipped) > 0 {
		attrs = append(attrs, "left_out", strings.Join(skipped, "; "))
	}
	r.Log.Info("wechatpay: platform certificates renewed", attrs...)
	return nil
}

func (r *Refresher) count(outcome string, held int) {
	if r.Metrics == nil {
		return
	}
	r.Metrics.WeChatPayCertRefreshes.WithLabelValues(r.Source, outcome).Inc()
	r.Metrics.WeChatPayCertsHeld.WithLabelValues(r.Source).Set(float64(held))
}

// answer is /v3/certificates' answer (WeChat Pay API v3, "下载平台证书").
type answer struct {
	Data []struct {
		SerialNo           string     `json:"serial_no"`
		EffectiveTime      string     `json:"effective_time"`
		ExpireTime         string     `json:"expire_time"`
		EncryptCertificate *encrypted `json:"encrypt_certificate"`
	} `json:"data"`
}

// encrypted is one certificate, encrypted with the APIv3 key.
type encrypted struct {
	Algorithm      string `json:"algorithm"`
	Nonce          string `json:"nonce"`
	AssociatedData string `json:"associated_data"`
	Ciphertext     string `json:"ciphertext"`
}

// download asks for the certificates and returns those the answer lists,
// each decrypted, parsed and bound to its serial_no; at least one must not
// be expired at now.
func (r *Refresher) download(ctx context.Context, now time.Time) ([]*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	res, err := r.client.Get(ctx, r.url)
	var apiErr *core.APIError
	switch {
	case errors.As(err, &apiErr):
		return nil, &Error{OutcomeRefused, fmt.Errorf("%d %s %s", apiErr.StatusCode, apiErr.Code, apiErr.Message)}
	case err != nil && res != nil && res.Response != nil:
		// The answer came (2xx) and the SDK's validation refused it.
		_ = res.Response.Body.Close()
		return nil, &Error{OutcomeBadSignature, err}
	case err != nil:
		return nil, &Error{OutcomeUnreachable, err}
	}
	defer res.Response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Response.Body, maxAnswerBytes))
	if err != nil {
		return nil, &Error{OutcomeUnreachable, err}
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, errors.New("the answer is not JSON")
	}
	if len(a.Data) == 0 {
		return nil, errors.New("the answer lists no certificate")
	}
	var certs []*x509.Certificate
	valid := 0
	for i, item := range a.Data {
		c, err := r.open(item.SerialNo, item.EncryptCertificate)
		if err != nil {
			return nil, fmt.Errorf("data[%d] (serial_no %q): %w", i, truncate(item.SerialNo), err)
		}
		if !now.After(c.NotAfter) {
			valid++
		}
		certs = append(certs, c)
	}
	if valid == 0 {
		return nil, errors.New("every certificate listed has expired")
	}
	return certs, nil
}

// open decrypts one encrypt_certificate with the APIv3 key and checks it
// is the certificate serial names.
func (r *Refresher) open(serial string, enc *encrypted) (*x509.Certificate, error) {
	switch {
	case strings.TrimSpace(serial) == "":
		return nil, errors.New("serial_no is missing")
	case enc == nil:
		return nil, errors.New("encrypt_certificate is missing")
	case enc.Algorithm != "AEAD_AES_256_GCM":
		return nil, fmt.Errorf("encrypt_certificate.algorithm %q is not AEAD_AES_256_GCM", truncate(enc.Algorithm))
	case len(enc.Nonce) != 12: // the SDK's GCM would panic on another length
		return nil, errors.New("encrypt_certificate.nonce is not 12 bytes")
	}
	plain, err := utils.DecryptAES256GCM(r.apiv3Key, enc.AssociatedData, enc.Nonce, enc.Ciphertext)
	if err != nil {
		return nil, errors.New("encrypt_certificate does not decrypt with the APIv3 key")
	}
	block, _ := pem.Decode([]byte(plain))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("the decrypted text is not a PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, errors.New("the certificate does not parse")
	}
	if got := signature.CertificateSerial(c); normalSerial(got) != normalSerial(serial) {
		return nil, fmt.Errorf("the certificate's serial is %s", got)
	}
	return c, nil
}

// normalSerial compares serials as the key ring does: upper case, no
// leading zeros.
func normalSerial(s string) string {
	return strings.TrimLeft(strings.ToUpper(strings.TrimSpace(s)), "0")
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// trusted is the SDK's auth.Verifier over the keys the source already
// verifies with.
type trusted struct{ v platform.AnswerVerifier }

func (t trusted) Verify(_ context.Context, serial, message, sig string) error {
	return t.v.VerifyAnswer(serial, message, sig)
}

// GetSerial names no key: WeChat Pay then signs with its current one.
func (trusted) GetSerial(context.Context) (string, error) {
	return "", errors.New("any key held")
}
