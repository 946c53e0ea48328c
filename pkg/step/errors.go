package step

import (
	"errors"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
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

// ErrorClass names the class of err for dead letters and metrics:
// "permanent", "timeout" or "transient" (wire.ClassPermanent, ...).
func ErrorClass(err error) string {
	switch {
	case err == nil:
		return ""
	case IsPermanent(err):
		return wire.ClassPermanent
	case errors.Is(err, errDeadline):
		return wire.ClassTimeout
	default:
		return wire.ClassTransient
	}
}
