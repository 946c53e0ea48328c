package attempt_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// TestOneRunningAttemptPerPart: two different attempts of one part claimed
// at the same moment never both start; the refused one is held until the
// running attempt ends or its lease runs out.
func TestOneRunningAttemptPerPart(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	for round := range 40 {
		task := uuid.New()
		claims := make([]attempt.Lease, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				k := attempt.Key{TaskID: task, Step: "asr", Part: "", Attempt: i + 1}
				claims[i], errs[i] = attempt.Claim(ctx, db.Pool, k, "w"+string(rune('a'+i)), time.Minute, "", nil)
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		outcomes := map[string]int{}
		var running attempt.Lease
		for _, c := range claims {
			outcomes[c.Outcome]++
			if c.Outcome == attempt.Claimed {
				running = c
			}
		}
		if outcomes[attempt.Claimed] != 1 || outcomes[attempt.Held] != 1 {
			t.Fatalf("round %d: outcomes %v, want one claimed and one held", round, outcomes)
		}
		for _, c := range claims {
			if c.Outcome == attempt.Held && c.HeldUntil.IsZero() {
				t.Fatalf("round %d: held without held_until", round)
			}
		}
		if round == 0 {
			// Once the running attempt has ended, the other one may start.
			var worker string
			if err := db.Pool.QueryRow(ctx, `SELECT worker FROM task_steps WHERE id = $1`, running.StepID).Scan(&worker); err != nil {
				t.Fatal(err)
			}
			if err := attempt.Retry(running.StepID, worker, "boom").Exec(ctx, db.Pool); err != nil {
				t.Fatal(err)
			}
			other := 2
			if worker == "wb" {
				other = 1
			}
			c, err := attempt.Claim(ctx, db.Pool, attempt.Key{TaskID: task, Step: "asr", Attempt: other}, "wc", time.Minute, "", nil)
			if err != nil || c.Outcome != attempt.Claimed {
				t.Fatalf("claim after the running attempt ended: %+v, %v", c, err)
			}
		}
	}

	// An attempt whose lease ran out (its worker died) does not block the next.
	task := uuid.New()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, worker, lease_until)
		VALUES ($1, 'asr', 1, 'running', 'dead', now() - interval '1 second')`, task); err != nil {
		t.Fatal(err)
	}
	c, err := attempt.Claim(ctx, db.Pool, attempt.Key{TaskID: task, Step: "asr", Attempt: 2}, "w", time.Minute, "", nil)
	if err != nil || c.Outcome != attempt.Claimed {
		t.Fatalf("claim beside an expired lease: %+v, %v", c, err)
	}
	// Other parts are independent.
	c, err = attempt.Claim(ctx, db.Pool, attempt.Key{TaskID: task, Step: "asr", Part: "p2", Attempt: 3}, "w", time.Minute, "", nil)
	if err != nil || c.Outcome != attempt.Claimed {
		t.Fatalf("claim of another part: %+v, %v", c, err)
	}
}

// TestMissingClaimRowIsClaimLost: a claim row that is gone (lost in a crash)
// is ErrClaimLost, both when extending the lease and when finishing; a row
// held by another worker is ErrLeaseLost.
func TestMissingClaimRowIsClaimLost(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	c, err := attempt.Claim(ctx, db.Pool, attempt.Key{TaskID: uuid.New(), Step: "asr", Attempt: 1}, "w", time.Minute, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := attempt.Extend(ctx, db.Pool, c.StepID, "other", time.Minute); !errors.Is(err, attempt.ErrLeaseLost) {
		t.Errorf("extend by another worker: %v, want ErrLeaseLost", err)
	}
	err = attempt.Succeed(c.StepID, "other").Exec(ctx, db.Pool)
	if err := attempt.MapError(err); !errors.Is(err, attempt.ErrLeaseLost) {
		t.Errorf("finish by another worker: %v, want ErrLeaseLost", err)
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM task_steps WHERE id = $1`, c.StepID); err != nil {
		t.Fatal(err)
	}
	if err := attempt.Extend(ctx, db.Pool, c.StepID, "w", time.Minute); !errors.Is(err, attempt.ErrClaimLost) {
		t.Errorf("extend a lost claim: %v, want ErrClaimLost", err)
	}
	err = attempt.Succeed(c.StepID, "w").Exec(ctx, db.Pool)
	if err := attempt.MapError(err); !errors.Is(err, attempt.ErrClaimLost) {
		t.Errorf("finish a lost claim: %v, want ErrClaimLost", err)
	}
}
