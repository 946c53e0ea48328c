package step_test

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// handBacks returns the task's hand_back events of its timeline.
func handBacks(t *testing.T, h *harness, task uuid.UUID) []view.Event {
	t.Helper()
	evs, err := view.Timeline(context.Background(), h.db.Pool, task)
	if err != nil {
		t.Fatal(err)
	}
	var out []view.Event
	for _, e := range evs {
		if e.Kind == view.EventHandBack {
			out = append(out, e)
		}
	}
	return out
}

// newTask makes the row of env's task, running.
func newTask(t *testing.T, h *harness, env *wire.Envelope) {
	t.Helper()
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status) VALUES ($1, 'running')`, env.TaskID); err != nil {
		t.Fatal(err)
	}
}

// TestHandBacksAreInTheTimeline: a message checked again later because
// another worker holds the part's lease, and a step cut short by shutdown
// and handed back, are recorded durably with their reason and worker, and
// the task's timeline lists them; repeated hand-backs of one attempt for
// one reason are one event that counts them.
func TestHandBacksAreInTheTimeline(t *testing.T) {
	t.Parallel()
	h := setup(t)
	env := asrEnvelope(t)
	newTask(t, h, env)
	ctx := context.Background()
	if _, err := h.db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, worker, lease_until)
		VALUES ($1, 'asr', 1, 'running', 'other-worker', now() + interval '4 seconds')`, env.TaskID); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	blocking := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	r, stop := h.start(wire.QueueASR, route(blocking), func(c *step.Config) {
		c.Lease, c.ShutdownGrace, c.Worker = 2*time.Second, 200*time.Millisecond, "test-worker-1"
	})
	defer stop()
	h.publish(env.Retry())
	testenv.EventuallyWithin(t, 20*time.Second, "the held message to be recorded as handed back", func() bool {
		return len(handBacks(t, h, env.TaskID)) > 0
	})
	held := handBacks(t, h, env.TaskID)[0]
	if held.Status != "lease_held" || held.Worker != r.Worker() || held.Step != wire.StepASR || held.Attempt == nil || *held.Attempt != 2 ||
		held.Count == nil || *held.Count < 1 || held.Until == nil || held.Until.Before(held.At) {
		t.Fatalf("hand-back event %+v, want lease_held by %s of asr attempt 2 with a count", held, r.Worker())
	}

	// Once the other lease is over, attempt 2 runs; shutdown cuts it short.
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("attempt 2 never started")
	}
	stop()
	evs := handBacks(t, h, env.TaskID)
	var shutdown *view.Event
	for i := range evs {
		if evs[i].Status == "shutdown" {
			shutdown = &evs[i]
		}
	}
	if shutdown == nil || shutdown.Worker != "test-worker-1" || shutdown.Detail == "" || *shutdown.Count != 1 {
		t.Fatalf("hand-backs %+v, want one for the shutdown by test-worker-1 with its error", evs)
	}
}

// TestUnstartedDeliveriesAreRecordedAsHandedBack: deliveries the consumer
// received but never started when it stops (a shutdown here; a pause
// cancels the consumer the same way) are handed back and recorded, each
// with its attempt, as consumer_stopped.
func TestUnstartedDeliveriesAreRecordedAsHandedBack(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := broker.Dial(ctx, h.url, "test-unstarted", h.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	started := make(chan struct{}, 8)
	blocking := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	envs := make([]*wire.Envelope, 4)
	for i := range envs {
		envs[i] = asrEnvelope(t)
		newTask(t, h, envs[i])
	}
	_, stop := h.start(wire.QueueASR, route(blocking), func(c *step.Config) {
		c.Source = step.RunnerSource(conn, broker.ConsumeOptions{Queue: wire.QueueASR, Prefetch: 4, Concurrency: 1})
		c.ShutdownGrace, c.Worker = 200*time.Millisecond, "test-worker-2"
	})
	for _, env := range envs {
		h.publish(env)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery started")
	}
	testenv.EventuallyWithin(t, 20*time.Second, "the other deliveries to be prefetched", func() bool { return h.ready(wire.QueueASR) == 0 })
	stop()
	reasons := map[string]int{}
	for _, env := range envs {
		for _, e := range handBacks(t, h, env.TaskID) {
			if e.Worker != "test-worker-2" || *e.Attempt != 1 {
				t.Errorf("hand-back %+v, want test-worker-2's of attempt 1", e)
			}
			reasons[e.Status]++
		}
	}
	if reasons["shutdown"] != 1 || reasons["consumer_stopped"] != 3 {
		t.Fatalf("hand-backs by reason %v, want the running step's shutdown and 3 consumer_stopped", reasons)
	}
}
