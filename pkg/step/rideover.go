package step

import (
	"context"
	"fmt"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
)

// commitRidingOver commits the attempt's outcome rec as commit does, and
// rides over a failover of the database (store.RideOver): a commit that
// failed because the primary went away is sent again once the database
// answers, and one whose outcome is unknown is first resolved by reading
// the attempt (attempt.Holder) — still running and held by this worker: it
// was not applied, send it again; ended as rec by this worker: applied,
// committed (its outbox rows are left to the sweep); anything else: the
// outcome was decided elsewhere (ErrLeaseLost). A claim lost with the old
// primary is ErrClaimLost. The error is mapped (attempt.MapError).
func (r *Runner) commitRidingOver(ctx context.Context, dl *delivery, fns []func(context.Context, pgx.Tx) error, stmts []stmt, rec recOutcome) ([]*outbox.Message, error) {
	var out []*outbox.Message
	err := store.RideOver(ctx, store.FailoverWait, func(ctx context.Context, unknown bool) error {
		out = nil
		if unknown {
			k := attempt.Key{TaskID: dl.env.TaskID, Step: dl.env.Step, Part: dl.msg.Part, Attempt: dl.env.Attempt}
			worker, status, err := attempt.Holder(ctx, r.cfg.Pool, dl.stepID, k)
			switch {
			case err != nil:
				return err
			case worker == r.cfg.Worker && status == attempt.StatusRunning:
				// Not applied: send it again.
			case worker == r.cfg.Worker && status == attempt.Outcome(rec).Status():
				dl.log.Warn().Msg("commit outcome was unknown; the attempt's row says it was applied")
				return nil
			default:
				return fmt.Errorf("%w: after a commit whose outcome was unknown, step %d is %s, held by %s",
					attempt.ErrLeaseLost, dl.stepID, status, worker)
			}
		}
		var err error
		out, err = r.commit(ctx, dl.env.TaskID.String(), fns, stmts)
		return attempt.MapError(err)
	})
	return out, err
}
