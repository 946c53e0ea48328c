package step

import (
	"errors"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/wire"
)

// The retry decisions a handler returns live in pkg/fault, which engine
// packages (media, speech) use without depending on the runtime; these are
// the same functions under the runtime's name.

// Permanent marks err as permanent: the runtime dead-letters the message at
// once instead of retrying it (see fault.Permanent).
func Permanent(err error) error { return fault.Permanent(err) }

// IsPermanent reports whether err, or an error it wraps, was marked
// Permanent (see fault.IsPermanent).
func IsPermanent(err error) bool { return fault.IsPermanent(err) }

// RetryAfter marks err as transient with the earliest useful retry (see
// fault.RetryAfter).
func RetryAfter(err error, d time.Duration) error { return fault.RetryAfter(err, d) }

// RetryAfterHint returns the delay hint carried by err, if any (see
// fault.RetryAfterHint).
func RetryAfterHint(err error) (time.Duration, bool) { return fault.RetryAfterHint(err) }

// ErrorClass names the class of err for dead letters and metrics:
// "permanent", "timeout" or "transient" (wire.ClassPermanent, ...).
func ErrorClass(err error) string {
	switch {
	case err == nil:
		return ""
	case fault.IsPermanent(err):
		return wire.ClassPermanent
	case errors.Is(err, errDeadline):
		return wire.ClassTimeout
	default:
		return wire.ClassTransient
	}
}

// IsUnavailable reports whether err was marked fault.Unavailable: an outage
// of a service the step depends on, waited for without spending a retry.
func IsUnavailable(err error) bool { return fault.IsUnavailable(err) }

// Unavailable marks err as an outage of a service the step depends on (see
// fault.Unavailable).
func Unavailable(err error) error { return fault.Unavailable(err) }
