package step_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// bindEvents binds a fresh queue to every event.* routing key, as an
// integrator would, and returns its name.
func (h *harness) bindEvents() string {
	h.t.Helper()
	ch := h.channel()
	defer ch.Close()
	q, err := ch.QueueDeclare("events-"+uuid.NewString()[:8], false, false, false, false, nil)
	if err != nil {
		h.t.Fatalf("declare event queue: %v", err)
	}
	if err := ch.QueueBind(q.Name, wire.EventPrefix+"#", wire.Exchange, false, nil); err != nil {
		h.t.Fatalf("bind event queue: %v", err)
	}
	return q.Name
}

func (h *harness) taskRow(id uuid.UUID) (status, errText string) {
	h.t.Helper()
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT status, error FROM tasks WHERE id = $1`, id).
		Scan(&status, &errText); err != nil {
		h.t.Fatalf("read task %s: %v", id, err)
	}
	return status, errText
}

func TestAStepSuccessStartsItsTaskAndAnnouncesIt(t *testing.T) {
	t.Parallel()
	h := setup(t)
	events := h.bindEvents()
	var calls callLog
	h.run(wire.QueueASR, route(effect(&calls)))
	env := asrEnvelope(t)
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status, trace_id) VALUES ($1, 'queued', $2)`,
		env.TaskID, env.TraceID); err != nil {
		t.Fatal(err)
	}
	h.publish(env)
	testenv.EventuallyWithin(t, 20*time.Second, "the step's effect", func() bool { return h.effects(env.TaskID) == 1 })
	if status, _ := h.taskRow(env.TaskID); status != task.Running {
		t.Fatalf("task after its first step succeeded is %s, want running", status)
	}
	ev, err := wire.DecodeEvent(h.next(events, 20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Event != wire.EventTaskStarted || ev.TaskID != env.TaskID || ev.Step != wire.StepASR || ev.TraceID != env.TraceID {
		t.Fatalf("event = %+v, want task.started of the task by asr", ev)
	}
}

// TestARefusedTaskTransitionClosesTheAttempt: a handler's change of its
// task that the task's status refuses (the task was cancelled, or failed,
// while the step ran, and the runner did not learn it before the commit)
// commits nothing the handler staged, ends the attempt failed with the
// refusal as its reason, and is neither retried nor dead-lettered.
func TestARefusedTaskTransitionClosesTheAttempt(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var calls callLog
	_, stop := h.start(wire.QueueASR, route(step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		calls.add(msg)
		// Cancelled while the step runs; no watcher tells the runner.
		if _, err := task.Apply(ctx, h.db.Pool, task.Cancel(task.Ref{ID: msg.Envelope.TaskID}, "test")); err != nil {
			return err
		}
		msg.Exec(`INSERT INTO effects (task_id, step) VALUES ($1, $2)`, msg.Envelope.TaskID, msg.Envelope.Step)
		msg.Apply(task.Succeed(task.RefOf(msg.Envelope), nil, ""))
		return nil
	})), func(c *step.Config) { c.Lease = time.Minute })
	defer stop()
	env := asrEnvelope(t)
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status) VALUES ($1, 'running')`,
		env.TaskID); err != nil {
		t.Fatal(err)
	}
	h.publish(env)
	var status, reason string
	testenv.EventuallyWithin(t, 20*time.Second, "the attempt closed", func() bool {
		err := h.db.Pool.QueryRow(context.Background(), `SELECT status, error FROM task_steps
			WHERE task_id = $1 AND attempt = 1`, env.TaskID).Scan(&status, &reason)
		return err == nil && status != "running"
	})
	if status != "failed" || !strings.Contains(reason, "succeed refused") && !strings.Contains(reason, "task cancelled while the step ran") {
		t.Fatalf("attempt ended %s (%q), want failed with the refusal", status, reason)
	}
	if n := h.effects(env.TaskID); n != 0 {
		t.Fatalf("%d effects of a refused step were committed", n)
	}
	if s, e := h.taskRow(env.TaskID); s != task.Cancelled || e != "cancelled: test" {
		t.Fatalf("task is %s (%q), want cancelled as it was", s, e)
	}
	// Once the runner has stopped, every delivery it took is settled: a
	// dead letter would be in the DLQ or still in the outbox.
	stop()
	if n := h.ready(wire.QueueDLQ) + h.stepMessages(); n != 0 {
		t.Fatalf("%d dead letters for a refused step", n)
	}
	if n := calls.len(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
}
