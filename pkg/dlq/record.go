package dlq

import (
	"context"

	"github.com/dubflow/dubflow/pkg/internal/deadletter"
	"github.com/jackc/pgx/v5"
)

// Entry is one dead letter to record (Record): the failed message, what it
// says about itself (task, step, part, attempt) and why it failed.
type Entry = deadletter.Entry

// Record records e in tx (dead_letters) and returns its id, 0 when a dead
// letter with the same message id was recorded before. An original that
// jsonb refuses (valid JSON with a \u0000 in a string) is kept as raw bytes
// only. The dead-letter recorder records task.dlq's messages with it, the
// outbox relay the rows the broker kept refusing: one way into the table.
func Record(ctx context.Context, tx pgx.Tx, e *Entry) (int64, error) {
	return deadletter.Insert(ctx, tx, e)
}
