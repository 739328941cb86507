// Package wechatcerts renews a wechatpay-v3 source's platform
// certificates: at start and every 12 hours it downloads WeChat Pay's
// GET /v3/certificates, signed as the merchant, and hands the preset the
// certificates it lists that are not expired (platform.PlatformCertificates),
// so a certificate rotation does not refuse every notification until
// someone edits the configuration.
//
// The request goes through WeChat Pay's own Go SDK
// (github.com/wechatpay-apiv3/wechatpay-go): its client signs it
// (WECHATPAY2-SHA256-RSA2048 with the merchant's API private key). The
// answer is believed as the SDK's core/downloader believes it: each
// certificate must decrypt with the merchant's APIv3 key
// (utils.DecryptAES256GCM: AEAD_AES_256_GCM, which only WeChat Pay and the
// merchant can seal) and carry the serial the answer gives it; then the
// SDK's response validator checks the answer's Wechatpay-Timestamp and
// Wechatpay-Signature by the key Wechatpay-Serial names, among the keys
// the source already holds and the certificates just decrypted. So a
// process started after WeChat Pay began to sign with a certificate it
// does not hold yet still takes it (a signature by held keys only locked
// such a process out for good). The SDK's downloader itself is not used:
// its URL is fixed to api.mch.weixin.qq.com, its first download verifies
// no signature (a NullValidator), it keeps expired certificates and does
// not check the serials.
//
// What a download believed lists is stored in MySQL (Store,
// wechatpay_certificates), replacing the merchant's earlier list: every
// gateway and worker loads it at start beside the configured
// certificates, and again after a download that fails, so a process
// verifies at once with the certificates another one downloaded, and while
// WeChat Pay cannot be reached.
//
// A download that fails (unreachable, refused, a signature that does not
// hold, an answer that does not decrypt or lists no valid certificate)
// changes nothing it believed before: the certificates held stay (with
// those stored since by another process), a WARN says why, the outcome is
// counted (callgate_wechatpay_certificates_refresh_total), and the next
// try is sooner than the interval.
package wechatcerts

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/validators"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"callgate/internal/metrics"
	"callgate/internal/outbound"
	"callgate/internal/platform"
	"callgate/internal/signature"
	"callgate/internal/source"
	"callgate/internal/store"
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
	// storeTimeout bounds one reading or writing of the stored
	// certificates.
	storeTimeout = 10 * time.Second
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

// Store keeps the certificates of the downloads believed, per merchant,
// for every process (*store.Store).
type Store interface {
	WeChatPayCertificates(ctx context.Context, mchID string, now time.Time) ([]store.WeChatPayCertificate, error)
	SaveWeChatPayCertificates(ctx context.Context, mchID string, certs []store.WeChatPayCertificate, at time.Time) error
}

// Refresher downloads one source's platform certificates.
type Refresher struct {
	Source   string
	Certs    platform.PlatformCertificates
	Interval time.Duration
	Log      *slog.Logger
	Metrics  *metrics.Metrics // nil: not counted
	Now      func() time.Time
	// Store keeps what a download believed for the other processes and the
	// next start (nil: held in memory only).
	Store Store

	client   *core.Client
	url      string
	mchID    string
	apiv3Key string
	// last is what the last download believed listed (at start: what was
	// stored): the certificates a failed download keeps.
	last []*x509.Certificate
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
	// https only, as the queriers (http to a loopback address for a
	// local simulator).
	base, err := outbound.Base("reconcile.api_base (WECHATPAY_API_BASE)", rc.APIBase, apiBase)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = outbound.Client(outbound.Options{Timeout: downloadTimeout, MaxAnswerBytes: maxAnswerBytes})
	}
	client, err := core.NewClient(ctx,
		option.WithMerchantCredential(s.Platform.MchID, rc.Serial, key),
		// The answer's signature is checked once its certificates are
		// decrypted (download), by them and the keys held.
		option.WithoutValidator(),
		option.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("WeChat Pay client: %w", err)
	}
	interval := rc.CertificatesRefresh
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Refresher{Source: s.Name, Certs: certs, Interval: interval, Log: slog.Default(), Now: time.Now,
		client: client, url: base + "/v3/certificates", mchID: s.Platform.MchID, apiv3Key: s.Platform.APIv3Key}, nil
}

// Start builds and runs, until ctx ends, a refresher for each enabled
// wechatpay-v3 source of presets (by source name) that verifies with
// platform certificates and has the merchant's credentials; a source with
// certificates and no credentials is logged as not renewed. Each first
// takes the certificates st holds for its merchant (st nil: none), then
// downloads in the background: nothing waits for WeChat Pay. A credential
// that cannot be read stops the start, naming its field; stored
// certificates that cannot be read do not (a WARN says so, and the next
// download is tried at once).
func Start(ctx context.Context, sources []source.Config, presets map[string]platform.Platform, st Store, log *slog.Logger, m *metrics.Metrics) ([]*Refresher, error) {
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
		r.Log, r.Metrics, r.Store = log, m, st
		log.Info("wechatpay: platform certificates renewed from /v3/certificates", "source", s.Name, "every", r.Interval.String(), "url", r.url)
		r.LoadStored(ctx)
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

// Refresh downloads the certificates once and, when the answer is
// believed, hands the preset the unexpired ones and stores them. A failure
// (an *Error) keeps the certificates held, adding those stored since.
func (r *Refresher) Refresh(ctx context.Context) error {
	now := r.Now()
	certs, err := r.download(ctx, now)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Outcome: OutcomeInvalid, Err: err}
		}
		// Another process may have downloaded what this one could not.
		if stored, serr := r.stored(ctx, now); serr == nil && adds(r.Certs.HeldCertificates(now), stored) {
			r.last = union(r.last, stored)
			r.Certs.SetDownloadedCertificates(r.last, now)
		}
		held := r.Certs.HeldCertificates(now)
		r.count(e.Outcome, len(held))
		r.Log.Warn("wechatpay: platform certificates not renewed; the certificates held stay",
			"source", r.Source, "outcome", e.Outcome, "reason", e.Err.Error(), "held", strings.Join(held, ","))
		return e
	}
	r.last = certs
	n, skipped := r.Certs.SetDownloadedCertificates(certs, now)
	held := r.Certs.HeldCertificates(now)
	r.count(OutcomeOK, n)
	attrs := []any{"source", r.Source, "held", strings.Join(held, ",")}
	if len(skipped) > 0 {
		attrs = append(attrs, "left_out", strings.Join(skipped, "; "))
	}
	r.Log.Info("wechatpay: platform certificates renewed", attrs...)
	r.save(ctx, certs, now)
	return nil
}

// LoadStored hands the preset the certificates stored for the merchant
// and not expired (what the last download believed by any process
// listed), beside the configured ones: a process's start, before its
// first download.
func (r *Refresher) LoadStored(ctx context.Context) {
	now := r.Now()
	stored, err := r.stored(ctx, now)
	if err != nil || len(stored) == 0 {
		return
	}
	r.last = stored
	n, _ := r.Certs.SetDownloadedCertificates(stored, now)
	if r.Metrics != nil {
		r.Metrics.WeChatPayCertsHeld.WithLabelValues(r.Source).Set(float64(n))
	}
	r.Log.Info("wechatpay: platform certificates loaded from MySQL", "source", r.Source,
		"held", strings.Join(r.Certs.HeldCertificates(now), ","))
}

// stored reads the merchant's stored certificates not expired at now
// (none without a Store). One that does not parse is left out, with a
// WARN.
func (r *Refresher) stored(ctx context.Context, now time.Time) ([]*x509.Certificate, error) {
	if r.Store == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	rows, err := r.Store.WeChatPayCertificates(ctx, r.mchID, now)
	if err != nil {
		r.Log.Warn("wechatpay: stored platform certificates not read", "source", r.Source, "error", err)
		return nil, err
	}
	var out []*x509.Certificate
	for _, row := range rows {
		block, _ := pem.Decode([]byte(row.PEM))
		var c *x509.Certificate
		if block != nil && block.Type == "CERTIFICATE" {
			c, _ = x509.ParseCertificate(block.Bytes)
		}
		if c == nil || normalSerial(signature.CertificateSerial(c)) != normalSerial(row.Serial) {
			r.Log.Warn("wechatpay: a stored platform certificate is left out: not the PEM certificate of its serial",
				"source", r.Source, "serial", truncate(row.Serial))
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// save stores what a download believed as the merchant's list. A failure
// is logged: the certificates are held all the same, and stored by the
// next download.
func (r *Refresher) save(ctx context.Context, certs []*x509.Certificate, now time.Time) {
	if r.Store == nil {
		return
	}
	rows := make([]store.WeChatPayCertificate, 0, len(certs))
	for _, c := range certs {
		rows = append(rows, store.WeChatPayCertificate{Serial: signature.CertificateSerial(c),
			PEM:         string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})),
			EffectiveAt: c.NotBefore, ExpiresAt: c.NotAfter})
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := r.Store.SaveWeChatPayCertificates(ctx, r.mchID, rows, now); err != nil {
		r.Log.Warn("wechatpay: platform certificates not stored (held by this process only until the next download)",
			"source", r.Source, "error", err)
	}
}

// adds reports whether certs holds a serial that held does not name.
func adds(held []string, certs []*x509.Certificate) bool {
	seen := make(map[string]bool, len(held))
	for _, serial := range held {
		seen[normalSerial(serial)] = true
	}
	for _, c := range certs {
		if !seen[normalSerial(signature.CertificateSerial(c))] {
			return true
		}
	}
	return false
}

// union is a, then the certificates of b whose serial a does not hold.
func union(a, b []*x509.Certificate) []*x509.Certificate {
	out := append([]*x509.Certificate(nil), a...)
	seen := make(map[string]bool, len(a))
	for _, c := range a {
		seen[normalSerial(signature.CertificateSerial(c))] = true
	}
	for _, c := range b {
		if !seen[normalSerial(signature.CertificateSerial(c))] {
			out = append(out, c)
		}
	}
	return out
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
// be expired at now, and the answer must be signed by one of them or by a
// key held.
func (r *Refresher) download(ctx context.Context, now time.Time) ([]*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	res, err := r.client.Get(ctx, r.url)
	var apiErr *core.APIError
	switch {
	case errors.As(err, &apiErr):
		return nil, &Error{OutcomeRefused, fmt.Errorf("%d %s %s", apiErr.StatusCode, apiErr.Code, apiErr.Message)}
	case err != nil:
		if res != nil && res.Response != nil {
			_ = res.Response.Body.Close()
		}
		return nil, &Error{OutcomeUnreachable, err}
	}
	defer res.Response.Body.Close()
	body, err := io.ReadAll(res.Response.Body) // the client bounds its size
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
	// The certificates are WeChat Pay's (sealed with the APIv3 key); the
	// answer must be too: signed by one of them, or by a key held.
	res.Response.Body = io.NopCloser(bytes.NewReader(body))
	v := validators.NewWechatPayResponseValidator(signedBy{held: r.Certs, certs: certs, now: now})
	if err := v.Validate(ctx, res.Response); err != nil {
		return nil, &Error{OutcomeBadSignature, err}
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

// signedBy is the SDK's auth.Verifier of a download's answer: the
// certificates it lists (not expired at now) and the keys the source
// already verifies with.
type signedBy struct {
	held  platform.AnswerVerifier
	certs []*x509.Certificate
	now   time.Time
}

func (v signedBy) Verify(_ context.Context, serial, message, sig string) error {
	for _, c := range v.certs {
		pub, ok := c.PublicKey.(*rsa.PublicKey)
		if ok && !v.now.After(c.NotAfter) && normalSerial(signature.CertificateSerial(c)) == normalSerial(serial) &&
			signature.VerifySHA256WithRSA(pub, []byte(message), sig) == nil {
			return nil
		}
	}
	return v.held.VerifyAnswer(serial, message, sig)
}

// GetSerial names no key: WeChat Pay then signs with its current one.
func (signedBy) GetSerial(context.Context) (string, error) {
	return "", errors.New("any key held or listed")
}
