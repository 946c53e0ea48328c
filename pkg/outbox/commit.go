package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrUnpublished is what Commit's error is (errors.Is) when the
// transaction committed but publishing its messages failed: they wait in
// the outbox for a sweep, which publishes every committed message at least
// once. The change is done; only its announcement is late.
var ErrUnpublished = errors.New("committed; its messages wait in the outbox for a sweep")

// Commit runs fn in one transaction on pool and, once it committed,
// publishes the outbox rows fn returned, each confirmed (Flush). An error
// of fn, or of the commit, rolls everything back and is returned as it is;
// a publish that fails after the commit is returned wrapped with
// ErrUnpublished. fn adds its messages with Add (or through pkg/task's
// transitions, which return their event's row) and returns their ids; ids
// of 0 (a transition without an event) are skipped. A library that
// commits through a Beginner (task.Submit, dub.Redub, retry.Task) runs in
// fn's transaction, as a savepoint, when given tx.
func Commit(ctx context.Context, pool *pgxpool.Pool, pub Publisher, fn func(tx pgx.Tx) ([]int64, error)) error {
	var ids []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		ids, err = fn(tx)
		return err
	})
	if err != nil {
		return err
	}
	keep := ids[:0:0]
	for _, id := range ids {
		if id != 0 {
			keep = append(keep, id)
		}
	}
	if err := Flush(ctx, pool, pub, keep); err != nil {
		return fmt.Errorf("%w: %w", ErrUnpublished, err)
	}
	return nil
}
