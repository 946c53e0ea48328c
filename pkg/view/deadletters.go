package view

import (
	"context"
	"fmt"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DeadLetter is a dead letter: an item of GET /api/dead-letters, of a
// task's deadLetters and of `dubctl dlq list --json`. It is pkg/dlq's
// record, whose JSON is the read model's.
type DeadLetter = dlq.DeadLetter

// DeadLetterOf is a copy of d.
func DeadLetterOf(d *dlq.DeadLetter) DeadLetter { return *d }

// DeadLetters lists dead letters (dlq.List) in the read model's shape.
func DeadLetters(ctx context.Context, q store.Querier, f dlq.Filter) ([]DeadLetter, error) {
	list, err := dlq.List(ctx, q, f)
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, 0, len(list))
	for i := range list {
		out = append(out, DeadLetterOf(&list[i]))
	}
	return out, nil
}

// GetDeadLetter reads one dead letter with its original message.
func GetDeadLetter(ctx context.Context, q store.Querier, id int64) (*DeadLetter, error) {
	d, err := dlq.Get(ctx, q, id)
	if err != nil {
		return nil, err
	}
	v := DeadLetterOf(d)
	return &v, nil
}

// Replayed is a dead letter replayed: what POST
// /api/dead-letters/{id}/replay answers and `dubctl dlq replay --json`
// lists (pkg/dlq's Replayed).
type Replayed = dlq.Replayed

// ReplayedOf is r.
func ReplayedOf(r dlq.Replayed) Replayed { return r }

// deadLettersOfTask reads a task's latest dead letters, without their
// messages.
func deadLettersOfTask(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]DeadLetter, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM dead_letters WHERE task_id = $1 ORDER BY failed_at DESC, id DESC LIMIT 100`, id)
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", id, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", id, err)
	}
	out := make([]DeadLetter, 0, len(ids))
	for _, dl := range ids {
		d, err := dlq.Get(ctx, tx, dl)
		if err != nil {
			return nil, err
		}
		v := DeadLetterOf(d)
		v.OriginalMessage = nil
		out = append(out, v)
	}
	return out, nil
}
