package signature

import (
	"net/http"
	"time"
)

// unsigned is scheme none: every request is accepted. New only builds it
// when Config.AllowUnsigned is true, so that turning verification off is
// always an explicit decision in the configuration.
type unsigned struct{}

var _ Verifier = (*unsigned)(nil)

func (unsigned) Verify(http.Header, []byte, time.Time) (Result, error) { return Result{}, nil }

func (unsigned) Headers() []string { return nil }
