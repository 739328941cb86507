package admin

import (
	"errors"
	"fmt"
	"time"
)

// SSOError is a sign-in that did not give a session, with what the login
// page tells the person.
type SSOError struct {
	Status int
	Msg    string
	// Err is the cause, for the log.
	Err error
	// Suspect marks what a forged redirect causes (an altered state, a
	// code the provider refuses, an ID token that fails its checks), as
	// opposed to the provider's trouble or the person's (cancelled, no
	// role): the sign-in limiter counts only these.
	Suspect bool
	// RetryAfter, on a 429, is how long the address must wait.
	RetryAfter time.Duration
}

// RetryAfterSeconds is wait as Retry-After's whole seconds, at least one.
func RetryAfterSeconds(wait time.Duration) int { return max(1, int(wait.Seconds()+0.5)) }

// SuspectSignIn reports whether err is a failed sign-in of the kind a
// forged redirect causes.
func SuspectSignIn(err error) bool {
	var se *SSOError
	return errors.As(err, &se) && se.Suspect
}

func (e *SSOError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *SSOError) Unwrap() error { return e.Err }

// NoRoleError is a person the provider vouched for whose roles claim
// names neither an operator nor a viewer group.
type NoRoleError struct {
	Actor  string
	Claim  string
	Values []string
}

func (e *NoRoleError) Error() string {
	return fmt.Sprintf("%s has no role: claim %q held %q", e.Actor, e.Claim, e.Values)
}
