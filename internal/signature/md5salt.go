package signature

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// MD5Salt verifies a signature that is the hex MD5 of a payload followed
// by a shared salt: sign = UPPER(hex(MD5(payload + salt))), Kuaidi100's
// subscription push (payload = the form value param, salt = the one given
// when subscribing). MD5 is what the platform chose, not a recommendation:
// the salt is the only secret.
//
// The signature is read in either case (the platform sends upper case).
// Any salt may match (rotation), each comparison is constant-time. Safe
// for concurrent use.
type MD5Salt struct {
	salts [][]byte
	pool  sync.Pool // of *md5State

	errMissing  error
	errEncoding error
	errMismatch error
}

type md5State struct {
	buf  []byte
	sig  [md5.Size]byte
	sums [][md5.Size]byte
}

// NewMD5Salt builds the verifier for salts. name says where the signature
// sits (the form parameter "sign"); errors name it. A salt may be empty
// (the platform signs with an empty salt too) but one is required.
func NewMD5Salt(name string, salts []string) (*MD5Salt, error) {
	if len(salts) == 0 {
		return nil, errors.New("at least one salt is required")
	}
	v := &MD5Salt{
		errMissing:  fmt.Errorf("%s: %w", name, ErrMissing),
		errEncoding: fmt.Errorf("%s is not a hex MD5: %w", name, ErrMalformed),
		errMismatch: fmt.Errorf("%s: %w", name, ErrMismatch),
	}
	for _, s := range salts {
		v.salts = append(v.salts, []byte(s))
	}
	v.pool.New = func() any { return &md5State{sums: make([][md5.Size]byte, len(v.salts))} }
	return v, nil
}

// Verify checks sign against payload. Errors wrap ErrMissing (no
// signature), ErrMalformed (not 32 hex digits) or ErrMismatch (no salt
// matched).
func (v *MD5Salt) Verify(payload, sign string) error {
	sign = strings.TrimSpace(sign)
	if sign == "" {
		return v.errMissing
	}
	st := v.pool.Get().(*md5State)
	defer v.put(st)
	if len(sign) != 2*md5.Size {
		return v.errEncoding
	}
	for i := range st.sig {
		hi, ok1 := unhex(sign[2*i])
		lo, ok2 := unhex(sign[2*i+1])
		if !ok1 || !ok2 {
			return v.errEncoding
		}
		st.sig[i] = hi<<4 | lo
	}
	for i, salt := range v.salts {
		st.buf = append(append(st.buf[:0], payload...), salt...)
		st.sums[i] = md5.Sum(st.buf)
	}
	ok := 0
	for i := range st.sums {
		ok |= subtle.ConstantTimeCompare(st.sig[:], st.sums[i][:])
	}
	if ok != 1 {
		return v.errMismatch
	}
	return nil
}

// maxRetainedPayload caps the buffer a pooled state keeps: a Kuaidi100
// snapshot of a few dozen checkpoints is a few KB, a hostile one is not
// worth pinning.
const maxRetainedPayload = 64 << 10

func (v *MD5Salt) put(st *md5State) {
	if cap(st.buf) > maxRetainedPayload {
		st.buf = nil
	}
	v.pool.Put(st)
}

// SignMD5Salt returns UPPER(hex(MD5(payload + salt))): what the platform
// sends (for tests and tools).
func SignMD5Salt(payload, salt string) string {
	sum := md5.Sum([]byte(payload + salt))
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}
