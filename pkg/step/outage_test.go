package step_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// An outage of a service the step needs (the object store restarting)
// spends none of the step's retries: four failures in a row would use up
// the budget of 3 retries and dead-letter the task, but marked unavailable
// they are waited for, and the step succeeds once the store is back.
func TestAnOutageDoesNotSpendTheRetryBudget(t *testing.T) {
	t.Parallel()
	var calls callLog
	var outages atomic.Int32
	h, env := serveASR(t, route(firstRuns(4, &outages, &calls, func(context.Context, *step.Message) error {
		return fault.Unavailable(errors.New("stat audios/x/source.wav: connection refused"))
	})), quickHandBacks)
	h.publish(env)
	testenv.EventuallyWithin(t, 2*time.Minute, "the step to succeed after the outage", func() bool { return h.effects(env.TaskID) == 1 })
	var attempts, succeeded int
	if err := h.db.Pool.QueryRow(context.Background(),
		`SELECT count(DISTINCT attempt), count(*) FILTER (WHERE status = 'succeeded') FROM task_steps WHERE task_id = $1 AND step = 'asr'`,
		env.TaskID).Scan(&attempts, &succeeded); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || succeeded != 1 {
		t.Fatalf("attempts %d, succeeded %d: want the one attempt to succeed (no retry spent on the outage)", attempts, succeeded)
	}
	if n := outages.Load(); n != 5 {
		t.Fatalf("handler ran %d times, want 5 (4 during the outage)", n)
	}
}

// An outage of Postgres under the handler's own queries (its connections
// cut, new ones refused) spends none of the step's retries either: the
// runtime classes the driver's error as unavailable without the handler
// marking it.
func TestADatabaseOutageInTheHandlerDoesNotSpendTheRetryBudget(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cut := testenv.CutProxy(t, h.db.URL)
	pool, err := pgxpool.New(context.Background(), cut.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var calls callLog
	var runs atomic.Int32
	do := effect(&calls)
	h.run(wire.QueueASR, route(step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		if runs.Add(1) <= 4 {
			cut.Cut()
			defer func() { _ = cut.Restore() }()
		}
		var segments int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1`, msg.Envelope.TaskID).Scan(&segments); err != nil {
			return fmt.Errorf("load segments: %w", err)
		}
		return do.Handle(ctx, msg)
	})), quickHandBacks)
	env := asrEnvelope(t)
	h.publish(env)
	testenv.EventuallyWithin(t, 2*time.Minute, "the step to succeed, or a retry", func() bool {
		return h.effects(env.TaskID) == 1 || attemptsOf(t, h, env) > 1
	})
	if n := attemptsOf(t, h, env); n != 1 || h.effects(env.TaskID) != 1 {
		t.Fatalf("%d attempts, %d effects: want the one attempt to succeed (no retry spent on the outage)", n, h.effects(env.TaskID))
	}
	if n := runs.Load(); n != 5 {
		t.Fatalf("handler ran %d times, want 5 (4 during the outage)", n)
	}
}

// The database going away under the runtime's own commit (the server ends
// the session: 57P01) hands the message back with the attempt freed; the
// step runs again as the same attempt instead of being recorded as a
// failed try.
func TestADatabaseOutageAtCommitDoesNotSpendARetry(t *testing.T) {
	t.Parallel()
	var calls callLog
	var runs atomic.Int32
	h, env := serveASR(t, route(firstRuns(1, &runs, &calls, func(_ context.Context, msg *step.Message) error {
		msg.Then(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
			return err
		})
		return nil
	})), quickHandBacks)
	h.publish(env)
	testenv.EventuallyWithin(t, 2*time.Minute, "the step to succeed", func() bool { return h.effects(env.TaskID) == 1 })
	if n := attemptsOf(t, h, env); n != 1 {
		t.Fatalf("%d attempts: want the one attempt to succeed (no retry spent on the outage)", n)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// quickHandBacks spaces the hand-backs in a row 20, 40, 80 ms ... instead
// of the runtime's 1, 2, 4 s: the outage tests count the runner's
// decisions, not how long it pauses between them (TestHandBackPause checks
// the default schedule).
func quickHandBacks(c *step.Config) {
	c.HandBackPause = func(n int32) time.Duration { return 20 * time.Millisecond << min(n-1, 5) }
}

// attemptsOf counts the distinct attempts of env's step.
func attemptsOf(t *testing.T, h *harness, env *wire.Envelope) int {
	t.Helper()
	var n int
	if err := h.db.Pool.QueryRow(context.Background(),
		`SELECT count(DISTINCT attempt) FROM task_steps WHERE task_id = $1 AND step = $2`, env.TaskID, env.Step).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
