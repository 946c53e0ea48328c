package step

import (
	"errors"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/wire"
)

// The retry decisions a handler returns (Permanent, RetryAfter, Park,
// Unavailable) live in pkg/fault, a leaf that engine packages (media,
// speech) use without depending on the runtime; handlers and the runtime
// call them there.

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
