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
// translation is reviewed, and the asr merge of its chunks, each apply
// Hold guarded by asr and translate with their own success, several
// committing at the same moment; the task is held in review exactly once
// — by whichever commits last, however they interleave — and not before
// the last part of both steps succeeded (batches done while asr still
// transcribes hold nothing).
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
		if _, err := pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'asr', 'merge')`, id); err != nil {
			t.Fatal(err)
		}
		// The first batch alone: translate is not complete, nothing held.
		finishPart(t, ctx, pool, id, wire.StepTranslate, "seg-0")
		if got := read(t, pool, id).status; got != task.Running {
			t.Fatalf("round %d: one batch of %d done, the task is %s", round, parts, got)
		}
		// The other batches and the asr merge at once; every other round
		// the batches first, which hold nothing while asr is not done.
		var wg sync.WaitGroup
		for p := 1; p < parts; p++ {
			wg.Go(func() { finishPart(t, ctx, pool, id, wire.StepTranslate, fmt.Sprint("seg-", p)) })
		}
		if round%2 == 1 {
			wg.Wait()
			if got := read(t, pool, id).status; got != task.Running {
				t.Fatalf("round %d: every batch done while asr transcribes, the task is %s", round, got)
			}
		}
		wg.Go(func() { finishPart(t, ctx, pool, id, wire.StepASR, "merge") })
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

// finishPart commits a part of the task's step as the step runtime does:
// the attempt's success, then the part's Hold, in one transaction.
func finishPart(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id uuid.UUID, step, part string) {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at)
			VALUES ($1, $2, $3, 1, 'succeeded', 'test', now(), now())`, id, step, part); err != nil {
			return err
		}
		_, err := task.Apply(ctx, tx, task.Hold(task.Ref{ID: id, Step: step}, task.StageTranslation, wire.StepASR, wire.StepTranslate))
		return err
	})
	if err != nil {
		t.Error(err)
	}
}
