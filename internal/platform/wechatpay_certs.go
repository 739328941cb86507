package platform

import (
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"callgate/internal/signature"
)

// Platform certificates that renew themselves (wechatpay-v3). The keys a
// wechatpay-v3 source verifies with are the configured ones (public_keys,
// certificates: never dropped, whatever their dates) plus the platform
// certificates downloaded from WeChat Pay's /v3/certificates
// (internal/wechatcerts; stored in MySQL, so a process also holds those
// another one downloaded), each held until it expires. Readers (every
// notification, every query answer) take the current set with one atomic
// load; a download builds a whole new set and swaps it in, so a reader
// never sees half of one.

// PlatformCertificates is a preset whose platform certificates can be
// renewed while it serves (wechatpay-v3). Safe for concurrent use.
type PlatformCertificates interface {
	AnswerVerifier
	// UsesCertificates reports whether the source verifies with platform
	// certificates (platform.certificates set): only then are they renewed.
	UsesCertificates() bool
	// SetDownloadedCertificates makes certs (already decrypted, checked
	// against their serial_no and verified as WeChat Pay's answer, or read
	// from what such a download stored) the downloaded certificates,
	// replacing those of the previous download.
	// A certificate expired at now is left out, and so is one whose serial
	// a configured key already holds with another key (the configuration
	// wins); skipped says why each was left out. held is the number of
	// platform certificates the source now verifies with.
	SetDownloadedCertificates(certs []*x509.Certificate, now time.Time) (held int, skipped []string)
	// HeldCertificates lists the serials of the platform certificates the
	// source verifies with at now: the configured ones, then the
	// downloaded ones not expired.
	HeldCertificates(now time.Time) []string
}

// wechatKeys is the rotating key set of a wechatpay-v3 source.
type wechatKeys struct {
	// base builds a new ring of the configured keys (they parsed once at
	// start, so building them again cannot fail).
	base func() *signature.KeyRing
	// configured lists the configured certificates' serials.
	configured []string
	cur        atomic.Pointer[wechatKeySet]
	mu         sync.Mutex // one SetDownloadedCertificates at a time
}

// wechatKeySet is one set: the ring, and when each downloaded key expires
// (configured keys are not in expires: they never expire here).
type wechatKeySet struct {
	ring       *signature.KeyRing
	expires    map[*rsa.PublicKey]time.Time
	downloaded []wechatDownloaded
}

type wechatDownloaded struct {
	serial   string
	notAfter time.Time
}

// newWeChatKeys builds the set of the configured keys.
func newWeChatKeys(keys []PublicKey, certs []string) (*wechatKeys, []error) {
	ring, errs := publicKeyRing(keys, certs, true)
	if len(errs) > 0 {
		return nil, errs
	}
	k := &wechatKeys{base: func() *signature.KeyRing {
		r, _ := publicKeyRing(keys, certs, true)
		return r
	}}
	if only, _ := publicKeyRing(nil, certs, true); only != nil {
		k.configured = only.IDs()
	}
	k.cur.Store(&wechatKeySet{ring: ring})
	return k, nil
}

// lookup is the key serial names at now, or nil: a downloaded
// certificate past its expiry is gone even before the next download.
func (k *wechatKeys) lookup(serial string, now time.Time) *rsa.PublicKey {
	s := k.cur.Load()
	pub := s.ring.Lookup(serial)
	if pub == nil {
		return nil
	}
	if exp, ok := s.expires[pub]; ok && now.After(exp) {
		return nil
	}
	return pub
}

// len is the number of configured and downloaded keys.
func (k *wechatKeys) len() int { return k.cur.Load().ring.Len() }

func (k *wechatKeys) setDownloaded(certs []*x509.Certificate, now time.Time) (int, []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	next := &wechatKeySet{ring: k.base(), expires: map[*rsa.PublicKey]time.Time{}}
	var skipped []string
	for _, c := range certs {
		serial := signature.CertificateSerial(c)
		pub, ok := c.PublicKey.(*rsa.PublicKey)
		if !ok {
			skipped = append(skipped, serial+" is not an RSA certificate")
			continue
		}
		if held := next.ring.Lookup(serial); held != nil {
			if !held.Equal(pub) {
				skipped = append(skipped, serial+" is configured with another key")
			}
			continue // a configured certificate (or the same one twice): kept as configured
		}
		if now.After(c.NotAfter) {
			skipped = append(skipped, fmt.Sprintf("%s expired at %s", serial, c.NotAfter.UTC().Format(time.RFC3339)))
			continue
		}
		if err := next.ring.Add(serial, pub); err != nil {
			skipped = append(skipped, serial+": "+err.Error())
			continue
		}
		next.expires[pub] = c.NotAfter
		next.downloaded = append(next.downloaded, wechatDownloaded{serial, c.NotAfter})
	}
	k.cur.Store(next)
	return len(k.held(next, now)), skipped
}

func (k *wechatKeys) held(s *wechatKeySet, now time.Time) []string {
	out := append([]string(nil), k.configured...)
	for _, d := range s.downloaded {
		if !now.After(d.notAfter) {
			out = append(out, d.serial)
		}
	}
	return out
}

func (p *wechatPay) UsesCertificates() bool { return len(p.keys.configured) > 0 }

func (p *wechatPay) SetDownloadedCertificates(certs []*x509.Certificate, now time.Time) (int, []string) {
	return p.keys.setDownloaded(certs, now)
}

func (p *wechatPay) HeldCertificates(now time.Time) []string {
	return p.keys.held(p.keys.cur.Load(), now)
}
