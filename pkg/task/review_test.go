package task_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestHoldWaitsForTheLastPart: the translate batches of a task whose
// translation is reviewed each apply Hold guarded by the translate step
// with their own success, several committing at the same moment; the
// task is held in review exactly once — by whichever commits last, however
// they interleave — and not before its last batch succeeded.
func TestHoldWaitsForTheLastPart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	const parts = 4
	for round := range 12 {
		id := seed(t, pool, task.Running)
		for p := range parts {
			if _, err := pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', $2)`,
				id, fmt.Sprint("seg-", p)); err != nil {
				t.Fatal(err)
			}
		}
		// The first batch alone: the step is not complete, nothing held.
		finishPart(t, ctx, pool, id, 0)
		if got := read(t, pool, id).status; got != task.Running {
			t.Fatalf("round %d: one batch of %d done, the task is %s", round, parts, got)
		}
		var wg sync.WaitGroup
		for p := 1; p < parts; p++ {
			wg.Go(func() { finishPart(t, ctx, pool, id, p) })
		}
		wg.Wait()
		if got := read(t, pool, id).status; got != task.Review {
			t.Fatalf("round %d: every batch done at once, the task is %s, want review", round, got)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE routing_key = 'event.task.review'
			AND convert_from(body, 'UTF8') LIKE '%' || $1 || '%'`, id.String()).Scan(&n); err != nil || n != 1 {
			t.Fatalf("round %d: %d task.review events (%v), want 1", round, n, err)
		}
	}
}

// finishPart commits part p of the task's translate step as the step
// runtime does: the attempt's success, then the batch's Hold, in one
// transaction.
func finishPart(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id uuid.UUID, p int) {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at)
			VALUES ($1, 'translate', $2, 1, 'succeeded', 'test', now(), now())`, id, fmt.Sprint("seg-", p)); err != nil {
			return err
		}
		_, err := task.Apply(ctx, tx, task.Hold(task.Ref{ID: id, Step: wire.StepTranslate}, task.StageTranslation, wire.StepTranslate))
		return err
	})
	if err != nil {
		t.Error(err)
	}
}
