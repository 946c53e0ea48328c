package step_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
)

// An outage of a service the step needs (the object store restarting)
// spends none of the step's retries: four failures in a row would use up
// the budget of 3 retries and dead-letter the task, but marked unavailable
// they are waited for, and the step succeeds once the store is back.
func TestAnOutageDoesNotSpendTheRetryBudget(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var calls callLog
	var outages atomic.Int32
	do := effect(&calls)
	h.run(broker.QueueASR, []step.Route{{Step: wire.StepASR, Timeout: 30 * time.Second,
		Handler: step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
			if outages.Add(1) <= 4 {
				return step.Unavailable(errors.New("stat audios/x/source.wav: connection refused"))
			}
			return do.Handle(ctx, msg)
		})}})
	env := asrEnvelope(t)
	h.publish(env)
	waitFor(t, 2*time.Minute, "the step to succeed after the outage", func() bool { return h.effects(env.TaskID) == 1 })
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
