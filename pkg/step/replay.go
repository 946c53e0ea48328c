package step

import (
	"context"

	"github.com/dubflow/dubflow/pkg/internal/replay"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
)

// Replay stages, inside tx, a new run of env's step with a fresh retry
// budget (replay.Step): the message gets the next unused attempt number of
// its part, that attempt is recorded as the base of a new budget
// (step_replays), and the message is added to the outbox. Earlier attempts
// stay recorded as history. Commit tx, then publish the returned outbox id
// (outbox.Commit) or leave it to a sweep.
func Replay(ctx context.Context, tx pgx.Tx, env *wire.Envelope, reason string) (*wire.Envelope, int64, error) {
	return replay.Step(ctx, tx, env, reason)
}
