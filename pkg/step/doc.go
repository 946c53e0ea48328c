// Package step is dubflow's step runtime: every worker is a Handler plugged
// into a Runner, and the Runner owns decoding and validation, idempotency
// through the step attempts (pkg/attempt, which writes them), dependencies
// between steps, timeouts, the
// transactional outbox, retries through the delay tiers, dead-lettering,
// graceful shutdown and the counts of what it decided. What every run
// shares besides — panic recovery, the trace, logging, the runs' durations
// — is Middleware around the handler (middleware.go: Recover, Tracing,
// Logging, Metrics.Middleware), as net/http's handlers are wrapped.
//
// A delivery goes decide, then do: the runner reads and claims it
// (deliver.go), asks decide (decide.go, pure, its table in decide_test.go)
// what to do, and carries that out — run the handler (run.go), commit the
// attempt's outcome and publish what it added (record.go, commit.go), ack,
// republish through a delay tier, dead-letter or hand back (deliver.go) —
// asking again after each run and commit until the delivery is settled.
//
// A task that stopped — cancelled or failed, or its parent cancelled by an
// operator — takes no new attempt (claim_step answers "ended"; the message
// is acked), and a step running it is cut short: its context is cancelled
// with fault.ErrTaskStopped when the process's task.Watcher hears of it
// (Config.Watch) or the lease heartbeat reads it, and the attempt ends
// failed without retry or dead letter.
package step

import "context"

// errDeadline is the error class the runtime reports for a step that ran
// past its timeout.
var errDeadline = context.DeadlineExceeded
