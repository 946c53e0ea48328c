package step

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/rs/zerolog"
)

// run runs the handler of a claimed step under its timeout, with a heartbeat
// that keeps the lease, and adds what it found to the delivery's facts. The
// step is cut short when its task's work stops (dl.watch, or the
// heartbeat's read): its context is cancelled with fault.ErrTaskStopped.
func (r *Runner) run(ctx context.Context, dl *delivery) {
	stopCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	runCtx, cancel := context.WithTimeoutCause(stopCtx, dl.route.Timeout,
		fmt.Errorf("step %s timed out after %s: %w", dl.env.Step, dl.route.Timeout, context.DeadlineExceeded))
	watch := dl.watch // set by read before the claim
	go func() {
		select {
		case <-watch.Done():
			stop(fmt.Errorf("task %s: %w", watch.Status(), fault.ErrTaskStopped))
		case <-runCtx.Done():
		}
	}()
	lost := r.heartbeat(runCtx, cancel, watch, dl.stepID, dl.log)
	var err error
	if watch.Status() == "" {
		err = dl.route.Handler.Handle(runCtx, dl.msg) // Recover, outermost, turns a panic into an error
	}
	if err != nil && runCtx.Err() != nil && !errors.Is(err, context.Cause(runCtx)) {
		err = fmt.Errorf("%w (%w)", err, context.Cause(runCtx))
	}
	cancel()
	f := &dl.facts
	// An outage of the database under the handler's own queries is waited
	// for like any unavailable service, not counted as the step's failure.
	f.Ran, f.Err, f.Lost = true, store.MarkUnavailable(err), loss(lost.Load())
	f.Stopped = watch.Status()
	f.Interrupted = err != nil && ctx.Err() != nil
	r.countWaits(ctx, dl)
}

// heartbeat extends the lease while the step runs; when the lease or the
// claim is lost it cancels the step and records which (a loss) in the
// returned value; when the task's work stopped it stops watch (the
// fallback of a status notification that was missed).
func (r *Runner) heartbeat(ctx context.Context, cancel context.CancelFunc, watch *task.Watch, stepID int64, log zerolog.Logger) *atomic.Int32 {
	lost := new(atomic.Int32)
	var stopped *attempt.StoppedError
	// Lease extensions come with the step's time, not its work: counted
	// apart, so statements per task do not swing with the machine's load.
	ctx = store.WithStep(ctx, store.StepOf(ctx)+LeaseSuffix)
	go ops.Every(ctx, r.cfg.Lease/3, func(ctx context.Context) {
		err := attempt.Extend(ctx, r.cfg.Pool, stepID, r.cfg.Worker, r.cfg.Lease)
		switch {
		case errors.Is(err, attempt.ErrLeaseLost):
			lost.Store(int32(leaseLost))
			cancel()
		case errors.Is(err, attempt.ErrClaimLost):
			lost.Store(int32(claimLost))
			cancel()
		case errors.As(err, &stopped):
			watch.Stop(stopped.Status)
		case err != nil && ctx.Err() == nil:
			log.Warn().Err(err).Msg("extend lease")
		}
	})
	return lost
}
