package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"sync"
)

// maxRetainedBuf caps the scratch buffer a pooled macState keeps between
// requests, so one request with a huge webhook-id does not pin memory.
const maxRetainedBuf = 4 << 10

// macSet computes HMAC-SHA256 of one message under every configured key
// (one per rotated secret). Keyed HMAC states are built once and pooled, so
// a verification costs no allocations in the steady state.
type macSet struct {
	pool sync.Pool // of *macState
}

// macState is the per-request scratch space: one keyed HMAC and one result
// per secret, a buffer for the signed prefix and for copying header
// substrings, and room for one decoded signature.
type macState struct {
	macs []hash.Hash
	sums [][sha256.Size]byte
	buf  []byte
	sig  [48]byte // >= base64 DecodedLen(44) and hex-decoded size
}

func newMACSet(keys [][]byte) *macSet {
	s := &macSet{}
	s.pool.New = func() any {
		st := &macState{
			macs: make([]hash.Hash, len(keys)),
			sums: make([][sha256.Size]byte, len(keys)),
			buf:  make([]byte, 0, 128),
		}
		for i, k := range keys {
			st.macs[i] = hmac.New(sha256.New, k)
		}
		return st
	}
	return s
}

func (s *macSet) get() *macState { return s.pool.Get().(*macState) }

func (s *macSet) put(st *macState) {
	if cap(st.buf) > maxRetainedBuf {
		st.buf = make([]byte, 0, 128)
	}
	s.pool.Put(st)
}

// sum computes, for every key, HMAC(prefix || body) into st.sums.
func (st *macState) sum(prefix, body []byte) {
	for i, m := range st.macs {
		m.Reset()
		if len(prefix) > 0 {
			m.Write(prefix)
		}
		m.Write(body)
		m.Sum(st.sums[i][:0])
	}
}

// match reports, in constant time per comparison, whether sig equals the MAC
// under any key.
func (st *macState) match(sig []byte) bool {
	ok := false
	for i := range st.sums {
		if hmac.Equal(sig, st.sums[i][:]) {
			ok = true
		}
	}
	return ok
}

// decodeHex decodes a 64-digit hex signature (either case) into st.sig.
func (st *macState) decodeHex(s string) ([]byte, bool) {
	if len(s) != 2*sha256.Size {
		return nil, false
	}
	dst := st.sig[:sha256.Size]
	for i := range dst {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return nil, false
		}
		dst[i] = hi<<4 | lo
	}
	return dst, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// b64Len is the padded standard base64 length of a SHA-256 MAC.
var b64Len = base64.StdEncoding.EncodedLen(sha256.Size) // 44

// decodeStdBase64 decodes a padded standard base64 signature into st.sig,
// requiring exactly 32 bytes. It uses st.buf as scratch.
func (st *macState) decodeStdBase64(s string) ([]byte, bool) {
	if len(s) != b64Len {
		return nil, false
	}
	st.buf = append(st.buf[:0], s...)
	n, err := base64.StdEncoding.Decode(st.sig[:], st.buf)
	if err != nil || n != sha256.Size {
		return nil, false
	}
	return st.sig[:n], true
}

// decodeAnyBase64 decodes a signature in standard or URL-safe base64, padded
// or not, into st.sig, requiring exactly 32 bytes. It uses st.buf as scratch.
func (st *macState) decodeAnyBase64(s string) ([]byte, bool) {
	for len(s) > 0 && s[len(s)-1] == '=' && len(s) > b64Len-2 {
		s = s[:len(s)-1]
	}
	if len(s) != base64.RawStdEncoding.EncodedLen(sha256.Size) { // 43
		return nil, false
	}
	st.buf = st.buf[:0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '-':
			c = '+'
		case '_':
			c = '/'
		}
		st.buf = append(st.buf, c)
	}
	n, err := base64.RawStdEncoding.Decode(st.sig[:], st.buf)
	if err != nil || n != sha256.Size {
		return nil, false
	}
	return st.sig[:n], true
}
