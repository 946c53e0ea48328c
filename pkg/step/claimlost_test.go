package step_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestLostClaimIsRetriedNeverAcked: a claim committed without waiting for
// the WAL flush can vanish in a Postgres crash. A worker that finds its
// claim row gone — when it commits, or when its heartbeat extends the lease
// — hands the message back for a retry; it never takes "no row" for "taken
// over" and acks, which would lose the message.
func TestLostClaimIsRetriedNeverAcked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// wait makes the first run outlive a heartbeat.
		wait bool
	}{{"found at commit", false}, {"found by the heartbeat", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			var calls callLog
			var runs atomic.Int32
			h.run(wire.QueueASR, route(firstRuns(1, &runs, &calls, func(ctx context.Context, msg *step.Message) error {
				// The crash: the claim row is gone.
				if _, err := h.db.Pool.Exec(ctx, `DELETE FROM task_steps WHERE task_id = $1`, msg.Envelope.TaskID); err != nil {
					return err
				}
				if tc.wait {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			})), func(c *step.Config) { c.Lease = 3 * time.Second })
			env := asrEnvelope(t)
			h.publish(env)
			testenv.EventuallyWithin(t, 30*time.Second, "the step to run again and succeed", func() bool { return h.effects(env.TaskID) == 1 })
			if n := runs.Load(); n != 2 {
				t.Errorf("runs = %d, want 2", n)
			}
		})
	}
}

// TestDifferentAttemptWaitsForTheRunningOne: a re-drive (attempt 2) of a
// part whose attempt 1 is still running under a live lease is not run beside
// it, nor acked: it is checked again later and runs once that lease is over.
func TestDifferentAttemptWaitsForTheRunningOne(t *testing.T) {
	t.Parallel()
	var calls callLog
	h, env := serveASR(t, route(effect(&calls)), func(c *step.Config) { c.Lease = 2 * time.Second })
	var leaseEnd time.Time
	if err := h.db.Pool.QueryRow(context.Background(), `INSERT INTO task_steps (task_id, step, attempt, status, worker, lease_until)
		VALUES ($1, 'asr', 1, 'running', 'other-worker', now() + interval '3 seconds') RETURNING lease_until`, env.TaskID).Scan(&leaseEnd); err != nil {
		t.Fatal(err)
	}
	h.publish(env.Retry())
	testenv.EventuallyWithin(t, 30*time.Second, "attempt 2 to run once attempt 1's lease is over", func() bool { return h.effects(env.TaskID) == 1 })
	got := calls.snapshot()
	if len(got) != 1 || got[0].attempt != 2 {
		t.Fatalf("calls %+v, want one of attempt 2", got)
	}
	if got[0].at.Before(leaseEnd) {
		t.Errorf("attempt 2 ran at %s, before attempt 1's lease ended at %s", got[0].at, leaseEnd)
	}
}
