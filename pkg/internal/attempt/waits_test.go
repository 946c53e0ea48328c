package attempt_test

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// TestWaitsCountTheCurrentBudget: the waits of a part are its attempts
// that ended waiting for an engine, before the attempt asked about and
// since its latest replay (a replay starts the count again); other parts'
// and failed attempts do not count.
func TestWaitsCountTheCurrentBudget(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	task := uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Attempts 1-3 waited, 4 failed, 5 waited; a replay starts a budget at 6
	// (its first attempt has none before it); 6-7 waited.
	for _, a := range []int{1, 2, 3, 5, 6, 7} {
		exec(`INSERT INTO task_steps (task_id, step, part, attempt, status, wait_reason, wait_until)
			VALUES ($1, 'tts', 'p', $2, 'failed', 'rate_limit', now())`, task, a)
	}
	exec(`INSERT INTO task_steps (task_id, step, part, attempt, status) VALUES ($1, 'tts', 'p', 4, 'failed')`, task)
	exec(`INSERT INTO task_steps (task_id, step, part, attempt, status, wait_reason, wait_until)
		VALUES ($1, 'tts', 'other', 1, 'failed', 'no_quota', now())`, task)
	exec(`INSERT INTO step_replays (task_id, step, part, base_attempt) VALUES ($1, 'tts', 'p', 6)`, task)
	for attemptNo, want := range map[int]int{1: 0, 4: 3, 6: 0, 8: 2} {
		got, err := attempt.Waits(ctx, db.Pool, attempt.Key{TaskID: task, Step: "tts", Part: "p", Attempt: attemptNo})
		if err != nil || got != want {
			t.Errorf("waits before attempt %d = %d (%v), want %d", attemptNo, got, err, want)
		}
	}
}
