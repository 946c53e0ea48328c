package attempt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// status returns the status of attempt n of task's step part.
func status(t *testing.T, pool *pgxpool.Pool, task uuid.UUID, step, part string, n int) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT status FROM task_steps
		WHERE task_id = $1 AND step = $2 AND part = $3 AND attempt = $4`, task, step, part, n).Scan(&s); err != nil {
		t.Fatalf("status of %s part %q attempt %d: %v", step, part, n, err)
	}
	return s
}

// TestFinishRecordsEachOutcomesStatus: every outcome ends the claimed
// attempt with its status, and only the worker holding it may end it.
func TestFinishRecordsEachOutcomesStatus(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	task := uuid.New()
	for i, o := range []attempt.Outcome{attempt.Succeeded, attempt.Parked, attempt.Retried, attempt.DeadLettered, attempt.Refused} {
		part := string(o)
		l, err := attempt.Claim(ctx, db.Pool, attempt.Key{TaskID: task, Step: "tts", Part: part, Attempt: 1}, "w", time.Minute, "", nil)
		if err != nil || l.Outcome != attempt.Claimed {
			t.Fatalf("claim %d: %+v, %v", i, l, err)
		}
		if err := attempt.Finish(l.StepID, "w", o, "why").Exec(ctx, db.Pool); err != nil {
			t.Fatalf("finish as %s: %v", o, err)
		}
		if got := status(t, db.Pool, task, "tts", part, 1); got != o.Status() {
			t.Errorf("%s recorded as %s, want %s", o, got, o.Status())
		}
	}
	if attempt.Retried.Status() != attempt.StatusFailed || attempt.Succeeded.Status() != attempt.StatusSucceeded {
		t.Errorf("statuses of outcomes: retried %s, succeeded %s", attempt.Retried.Status(), attempt.Succeeded.Status())
	}
}

// TestCoverSucceedsThePartsAWholeRunDid: a run of the whole tts step
// records every tts part not succeeded and not running as succeeded, under
// the next attempt number; version parts, running parts and other steps
// are left alone.
func TestCoverSucceedsThePartsAWholeRunDid(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	task := uuid.New()
	for _, part := range []string{"seg-0", "seg-1", "seg-2", "v2"} {
		if err := attempt.AddPart(task, "tts", part, []byte(`{}`)).Exec(ctx, db.Pool); err != nil {
			t.Fatal(err)
		}
	}
	if err := attempt.AddPart(task, "translate", "seg-9", nil).Exec(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, lease_until) VALUES
		($1, 'tts', 'seg-0', 2, 'parked', NULL), ($1, 'tts', 'seg-1', 1, 'running', now() + interval '1 minute')`, task); err != nil {
		t.Fatal(err)
	}
	if err := attempt.Cover(task, "whole run").Exec(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if got := status(t, db.Pool, task, "tts", "seg-0", 3); got != attempt.StatusSucceeded {
		t.Errorf("parked part covered as %s at attempt 3", got)
	}
	if got := status(t, db.Pool, task, "tts", "seg-2", 1); got != attempt.StatusSucceeded {
		t.Errorf("part that never ran covered as %s", got)
	}
	var others int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1
		AND (part IN ('seg-1', 'v2', 'seg-9') AND status = 'succeeded')`, task).Scan(&others); err != nil || others != 0 {
		t.Errorf("%d running, version or other steps' parts covered (%v), want none", others, err)
	}
}

// TestClosesJudgeLeasesByTheGivenClock: an attempt whose lease runs out in
// a minute is not closed now, and is closed when the clock given says two
// minutes later; CloseEnded closes only attempts of ended tasks.
func TestClosesJudgeLeasesByTheGivenClock(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	live, ended := uuid.New(), uuid.New()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tasks (id, status) VALUES ($1, 'running'), ($2, 'done')`, live, ended); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, task := range []uuid.UUID{live, ended} {
		l, err := attempt.Claim(ctx, db.Pool, attempt.Key{TaskID: task, Step: "asr", Attempt: 1}, "w", time.Minute, "", nil)
		if err != nil || l.Outcome != attempt.Claimed {
			t.Fatalf("claim: %+v, %v", l, err)
		}
		ids = append(ids, l.StepID)
	}
	if closed, err := attempt.CloseEnded(ctx, db.Pool, 0, 10, nil); err != nil || len(closed) != 0 {
		t.Fatalf("closed %+v (%v) while the leases are live", closed, err)
	}
	if ok, err := attempt.CloseExpired(ctx, db.Pool, ids[0], "expired", nil); err != nil || ok {
		t.Fatalf("closed a live lease: %v, %v", ok, err)
	}
	var now time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Minute)
	closed, err := attempt.CloseEnded(ctx, db.Pool, 30*time.Second, 10, &later)
	if err != nil || len(closed) != 1 || closed[0].TaskID != ended || closed[0].TaskStatus != "done" {
		t.Fatalf("two minutes later CloseEnded closed %+v (%v), want the ended task's attempt", closed, err)
	}
	if ok, err := attempt.CloseExpired(ctx, db.Pool, ids[0], "expired", &later); err != nil || !ok {
		t.Fatalf("two minutes later the expired lease was not closed: %v, %v", ok, err)
	}
	if got := status(t, db.Pool, live, "asr", "", 1); got != attempt.StatusFailed {
		t.Errorf("closed attempt is %s", got)
	}
	if err := attempt.Succeed(ids[0], "w").Exec(ctx, db.Pool); !errors.Is(err, attempt.ErrLeaseLost) {
		t.Errorf("the closed attempt's late success: %v, want ErrLeaseLost", err)
	}
}
