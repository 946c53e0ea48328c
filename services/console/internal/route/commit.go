package route

import (
	"context"
	"errors"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Committer commits an operator's change of a task with the messages it
// stages.
type Committer struct {
	Pool *pgxpool.Pool
	Pub  outbox.Publisher
	Log  zerolog.Logger
}

// Commit runs fn in one transaction and publishes the outbox rows it
// returns after the commit (outbox.Commit); a publish that fails is logged
// and left to the workers' outbox sweep: the change of task id is done.
func (c Committer) Commit(ctx context.Context, id uuid.UUID, fn func(tx pgx.Tx) ([]int64, error)) error {
	err := outbox.Commit(ctx, c.Pool, c.Pub, fn)
	if errors.Is(err, outbox.ErrUnpublished) {
		c.Log.Warn().Err(err).Str("task_id", id.String()).Msg("publish deferred to the outbox sweep")
		return nil
	}
	return err
}
