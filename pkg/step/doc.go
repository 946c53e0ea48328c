// Package step is dubflow's step runtime: every worker is a Handler plugged
// into a Runner, and the Runner owns decoding and validation, idempotency
// through task_steps, dependencies between steps, timeouts, the
// transactional outbox, retries through the delay tiers, dead-lettering,
// panic recovery, graceful shutdown and metrics.
package step

import "context"

// errDeadline is the error class the runtime reports for a step that ran
// past its timeout.
var errDeadline = context.DeadlineExceeded
