package step_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
)

// A commit whose answer is lost (the server goes away between the COMMIT
// and its answer, as when a primary is lost) is resolved by reading the
// attempt once the database answers again: applied (the outcome's
// statements sent in one batch, COMMIT included) — acked as committed;
// not applied (a transaction of several round trips, cut before its
// COMMIT) — committed again. Either way the handler runs once and the
// message is never handed back. (A first message prepares the statements
// on the runner's one connection.)
func TestACommitWhoseAnswerIsLostIsResolvedByReading(t *testing.T) {
	t.Parallel()
	for _, staged := range []string{"statements", "transaction function"} {
		t.Run(staged, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			cut := testenv.CutProxy(t, h.db.URL)
			// One connection, so that the second message's statements are
			// prepared on it already and its batch goes in one round trip.
			pool, err := store.Open(context.Background(), cut.URL+"&pool_max_conns=1")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			var runs atomic.Int32
			var released atomic.Int64
			_, stop := h.start(wire.QueueASR, route(step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
				insert := `INSERT INTO effects (task_id, step, part) VALUES ($1, $2, $3)`
				if staged == "statements" {
					msg.Exec(insert, msg.Envelope.TaskID, msg.Envelope.Step, msg.Part)
				} else {
					msg.Then(func(ctx context.Context, tx pgx.Tx) error {
						_, err := tx.Exec(ctx, insert, msg.Envelope.TaskID, msg.Envelope.Step, msg.Part)
						return err
					})
				}
				if runs.Add(1) != 2 {
					return nil
				}
				if staged == "transaction function" {
					// Its first statement's answer never comes and the
					// connection closes: the COMMIT is never sent.
					if err := cut.HoldAnswers(300 * time.Millisecond); err != nil {
						return err
					}
					time.AfterFunc(1500*time.Millisecond, func() {
						released.Store(time.Now().UnixNano())
						_ = cut.ReleaseAnswers()
					})
					return nil
				}
				// The batch reaches the server, which commits it; its answer
				// is held until the commit is seen from outside, then the
				// connection is cut: the answer is lost whatever the
				// machine's load (no window to send the batch in).
				if err := cut.HoldAnswers(0); err != nil {
					return err
				}
				go loseTheAnswer(t, h, cut, msg.Envelope.TaskID.String(), &released)
				return nil
			})), func(c *step.Config) {
				c.Pool = pool
				// Nothing else of the runner's may take the one connection
				// while answers are held: a query of the outbox sweep's, or
				// a lease extension, whose answer is held, would keep the
				// batch from ever being sent (the sweep's 200 ms tick found
				// that window on a loaded machine).
				c.SweepInterval = time.Hour
				c.Lease = 10 * time.Minute
			})
			t.Cleanup(stop)
			warm := asrEnvelope(t)
			h.publish(warm)
			testenv.EventuallyWithin(t, time.Minute, "the first step to succeed", func() bool { return h.stepRows(warm.TaskID, "succeeded") == 1 })
			env := asrEnvelope(t)
			h.publish(env)
			testenv.EventuallyWithin(t, time.Minute, "the step to succeed, the answers released", func() bool {
				return h.stepRows(env.TaskID, "succeeded") == 1 && released.Load() != 0
			})
			stop() // returns once the delivery is settled: acked, or handed back
			if n := h.ready(wire.QueueASR); n != 0 {
				t.Errorf("%d messages back in the queue, want none", n)
			}
			var effects, handBacks int
			var at time.Time
			if err := h.db.Pool.QueryRow(context.Background(), `SELECT count(*), max(at),
				(SELECT count(*) FROM step_handbacks WHERE task_id = $1) FROM effects WHERE task_id = $1`, env.TaskID).Scan(&effects, &at, &handBacks); err != nil {
				t.Fatal(err)
			}
			if runs.Load() != 2 || effects != 1 || handBacks != 0 {
				t.Fatalf("handler ran %d times for the second message, %d effects, %d hand-backs; want 1, 1, 0", runs.Load()-1, effects, handBacks)
			}
			// The batch's COMMIT went before the answers were held: its
			// effect is from the first try; the transaction's is from a
			// try after the release.
			if first := at.UnixNano() < released.Load(); first != (staged == "statements") {
				t.Errorf("effect written at %s, answers released at %s: want the %s applied by the first try: %t",
					at, time.Unix(0, released.Load()), staged, staged == "statements")
			}
		})
	}
}

// loseTheAnswer waits until the effect of task id is committed (seen on a
// connection of the test's own, not through the proxy), then cuts every
// connection through the proxy, ends the hold and accepts connections
// again, recording in released when.
func loseTheAnswer(t *testing.T, h *harness, cut *testenv.Cuttable, id string, released *atomic.Int64) {
	committed := testenv.Poll(time.Now().Add(time.Minute), func() bool {
		var n int
		err := h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE task_id = $1`, id).Scan(&n)
		return err == nil && n > 0
	})
	if !committed {
		t.Errorf("the batch of task %s was not committed within a minute", id)
	}
	cut.Cut()
	_ = cut.ReleaseAnswers()
	released.Store(time.Now().UnixNano())
	if err := cut.Restore(); err != nil {
		t.Errorf("restore the proxy: %v", err)
	}
}
