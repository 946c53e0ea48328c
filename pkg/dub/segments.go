package dub

import (
	"context"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned for a task that does not exist (pkg/task's, the
// tasks' owner, so that a reader and a re-dub refuse a missing task alike).
var ErrNotFound = task.ErrNotFound

// Querier reads rows: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
