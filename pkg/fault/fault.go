// Package fault holds the retry decisions a step handler returns as errors:
// Permanent (no retry can fix it: dead-letter now), RetryAfter (transient,
// with the earliest useful retry) and Park (stop without retry for an
// operator). Any other error is transient. It depends on nothing but the
// standard library, so that engine packages (media, speech) can mark their
// errors without importing the step runtime, Postgres or the broker.
package fault

import (
	"errors"
	"time"
)

// permanentError marks an error that no retry can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the runtime dead-letters the message at
// once instead of retrying it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAfterError is a transient error that names the earliest time a retry
// is useful (an HTTP 429 with Retry-After, for example).
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter marks err as transient with a hint that a retry makes sense no
// sooner than d. The runtime picks the first delay tier not shorter than d.
// RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: d}
}

// RetryAfterHint returns the delay hint carried by err, if any.
func RetryAfterHint(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

// parkError stops a step without retry and without dead letter.
type parkError struct{ err error }

func (e *parkError) Error() string { return e.err.Error() }
func (e *parkError) Unwrap() error { return e.err }

// Park stops the step without a retry and without a dead letter, committing
// what the handler staged (its compensation messages, say); the attempt is
// recorded as parked with err as its reason, and an operator re-drives it
// later with a fresh retry budget. Park(nil) is nil.
func Park(err error) error {
	if err == nil {
		return nil
	}
	return &parkError{err: err}
}

// IsParked reports whether err, or an error it wraps, was made by Park.
func IsParked(err error) bool {
	var p *parkError
	return errors.As(err, &p)
}

// unavailableError marks an error that says a service the step depends on
// (the object store, say) cannot be reached right now.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// Unavailable marks err as an outage of a service the step depends on, not
// a failure of the step: the runtime hands the message back after a growing
// pause without spending one of the step's retries, so that a storage
// restart does not use up a task's retry budget in seconds. The queue's
// delivery limit still bounds how long it waits. Unavailable(nil) is nil.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{err: err}
}

// IsUnavailable reports whether err, or an error it wraps, was marked
// Unavailable. A Permanent mark wins.
func IsUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u) && !IsPermanent(err)
}

// Reasons a step waits for an engine (Wait).
const (
	WaitNoQuota   = "no_quota"   // every engine of the pool spent its daily quota
	WaitRateLimit = "rate_limit" // every engine is rate limited or cooling down
	WaitNoEngine  = "no_engine"  // no engine can serve: breakers open, none configured
	// WaitProjectQuota: the task's project used its daily minutes on the
	// shared engines (pkg/tenant); the step waits for the next day, and
	// such waits are not bounded (the step is parked, never failed).
	WaitProjectQuota = "project_quota"
)

// waitError says that no engine can serve the step before a time.
type waitError struct {
	err    error
	reason string
	until  time.Time
}

func (e *waitError) Error() string { return e.err.Error() }
func (e *waitError) Unwrap() error { return e.err }

// Wait marks err as "no engine can serve this step before until" for
// reason (WaitNoQuota, WaitRateLimit, WaitNoEngine): the runtime records
// the attempt as waiting with its reason and time and re-offers the step
// then, without spending one of its retries. Wait(nil, ...) is nil.
func Wait(err error, reason string, until time.Time) error {
	if err == nil {
		return nil
	}
	return &waitError{err: err, reason: reason, until: until}
}

// WaitOf returns the reason and time carried by a Wait error. A Permanent
// mark wins.
func WaitOf(err error) (reason string, until time.Time, ok bool) {
	var w *waitError
	if !errors.As(err, &w) || IsPermanent(err) {
		return "", time.Time{}, false
	}
	return w.reason, w.until, true
}

// ErrTaskStopped is the cause (context.Cause) of a step's context that the
// step runtime cancelled because the step's task stopped while it ran: it
// was cancelled or failed. Whatever the step did is discarded; an engine
// pool gives back the quota of a call it cut short (pkg/pool), since the
// call's result is thrown away.
var ErrTaskStopped = errors.New("the task stopped (cancelled or failed) while the step ran")
