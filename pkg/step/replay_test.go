package step_test

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/jackc/pgx/v5"
)

func TestReplayTakesTheNextUnusedAttemptAndAFreshBudget(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	env := asrEnvelope(t)
	// Attempts 1 to 4 failed: the budget is spent.
	for a := 1; a <= 4; a++ {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status) VALUES ($1, 'asr', $2, 'failed')`,
			env.TaskID, a); err != nil {
			t.Fatal(err)
		}
	}
	replay := func() int {
		var attempt int
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			fresh, _, err := step.Replay(ctx, tx, env, "operator")
			if err == nil {
				attempt = fresh.Attempt
			}
			return err
		})
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
		return attempt
	}
	// Two replays before any worker picks the first up must not collide.
	if a, b := replay(), replay(); a != 5 || b != 6 {
		t.Fatalf("replays got attempts %d and %d, want 5 and 6", a, b)
	}
	c, err := attempt.Claim(ctx, db.Pool, attempt.Key{TaskID: env.TaskID, Step: "asr", Attempt: 6}, "w", time.Minute, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Outcome != attempt.Claimed || c.BaseAttempt != 6 {
		t.Fatalf("claim of the replay = %+v, want claimed with a budget starting at attempt 6", c)
	}
	var outbox int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE routing_key = 'task.asr'`).Scan(&outbox); err != nil {
		t.Fatal(err)
	}
	if outbox != 2 {
		t.Fatalf("outbox rows = %d, want 2", outbox)
	}
}
