package step

import (
	"context"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/internal/attempt"
)

// DefaultMaxWaits is the engine waits a part may have in one retry budget
// unless Config.MaxWaits says otherwise: seed 003's pending_queue
// max_retries.
const DefaultMaxWaits = 10

// countWaits adds to the facts of a run that ended waiting for an engine
// (fault.Wait) how many waits the part had before in its retry budget and
// the bound, so that decide ends a wait past the bound. A count that fails
// leaves the wait unbounded this once (the next wait counts again).
func (r *Runner) countWaits(ctx context.Context, dl *delivery) {
	f := &dl.facts
	reason, _, ok := fault.WaitOf(f.Err)
	if !ok || f.Lost != leaseHeld || f.Interrupted || reason == fault.WaitProjectQuota {
		return // a project's daily quota is waited out, however long: parked, never failed
	}
	bound := r.cfg.MaxWaits()
	if bound <= 0 {
		return
	}
	n, err := attempt.Waits(ctx, r.cfg.Pool, attempt.Key{TaskID: dl.env.TaskID, Step: dl.env.Step, Part: dl.msg.Part, Attempt: dl.env.Attempt})
	if err != nil {
		dl.log.Warn().Err(err).Msg("count engine waits; this wait is not bounded")
		return
	}
	f.Waits, f.MaxWaits = n, bound
}
