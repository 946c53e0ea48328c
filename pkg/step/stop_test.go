package step_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// stopBound is how soon after its task's cancel commits a running step
// must have stopped (issue 47: within 2 s).
const stopBound = 2 * time.Second

// withWatch gives the runner a task watcher running until the test ends,
// as pkg/worker gives each process one.
func withWatch(h *harness) options {
	w := task.NewWatcher(h.db.Pool, h.log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done })
	return func(c *step.Config) { c.Watch = w }
}

// blocking is a handler that stages an effect, says it started, then
// works until its context ends and reports the context's cause.
type blocking struct {
	started chan struct{}
	cause   chan error
	calls   atomic.Int32
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 8), cause: make(chan error, 8)}
}

func (b *blocking) Handle(ctx context.Context, msg *step.Message) error {
	b.calls.Add(1)
	msg.Exec(`INSERT INTO effects (task_id, step) VALUES ($1, $2)`, msg.Envelope.TaskID, msg.Envelope.Step)
	b.started <- struct{}{}
	<-ctx.Done()
	b.cause <- context.Cause(ctx)
	return ctx.Err()
}

// insertTask makes the row of a task in status (with its error), child of
// parent when parent is not nil.
func (h *harness) insertTask(id uuid.UUID, status, errText string, parent *uuid.UUID) {
	h.t.Helper()
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status, error, parent_task_id) VALUES ($1, $2, $3, $4)`,
		id, status, errText, parent); err != nil {
		h.t.Fatal(err)
	}
}

// cancelTask cancels the task as the console does and returns when the
// cancel committed, by the database's clock.
func (h *harness) cancelTask(id uuid.UUID) time.Time {
	h.t.Helper()
	ctx := context.Background()
	if _, err := task.Apply(ctx, h.db.Pool, task.Cancel(task.Ref{ID: id}, "test")); err != nil {
		h.t.Fatal(err)
	}
	var at time.Time
	if err := h.db.Pool.QueryRow(ctx, `SELECT updated_at FROM tasks WHERE id = $1`, id).Scan(&at); err != nil {
		h.t.Fatal(err)
	}
	return at
}

// stepMessages counts the outbox rows other than events (the cancel's
// own event.task.cancelled waits there, since the test publishes nothing).
func (h *harness) stepMessages() int {
	h.t.Helper()
	var n int
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE routing_key NOT LIKE 'event.%'`).Scan(&n); err != nil {
		h.t.Fatalf("count outbox: %v", err)
	}
	return n
}

// closedAttempt waits for the task's first attempt to end and returns its
// status, error and end (the database's clock).
func (h *harness) closedAttempt(id uuid.UUID) (status, reason string, finished time.Time) {
	h.t.Helper()
	testenv.EventuallyWithin(h.t, 20*time.Second, "the attempt closed", func() bool {
		var at *time.Time
		err := h.db.Pool.QueryRow(context.Background(), `SELECT status, error, finished_at FROM task_steps
			WHERE task_id = $1 AND attempt = 1`, id).Scan(&status, &reason, &at)
		if err == nil && at != nil {
			finished = *at
		}
		return err == nil && status != "running"
	})
	return status, reason, finished
}

// TestCancelStopsTheRunningStep: a step running when its task is
// cancelled is interrupted within stopBound of the cancel's commit (its
// context's cause is fault.ErrTaskStopped), nothing it staged is committed,
// its attempt ends failed saying why, and its message is acked: no retry,
// no dead letter.
func TestCancelStopsTheRunningStep(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b := newBlocking()
	_, stop := h.start(wire.QueueASR, route(b), withWatch(h))
	defer stop()
	env := asrEnvelope(t)
	h.insertTask(env.TaskID, task.Running, "", nil)
	h.publish(env)
	<-b.started
	cancelled := h.cancelTask(env.TaskID)
	select {
	case cause := <-b.cause:
		if !errors.Is(cause, fault.ErrTaskStopped) || !strings.Contains(cause.Error(), "cancelled") {
			t.Errorf("the step's context ended with %v, want the task cancelled (fault.ErrTaskStopped)", cause)
		}
	case <-time.After(testenv.Within(t, 20*time.Second)):
		t.Fatal("the running step was not interrupted")
	}
	status, reason, finished := h.closedAttempt(env.TaskID)
	if status != "failed" || !strings.Contains(reason, "task cancelled while the step ran") {
		t.Errorf("attempt ended %s (%q), want failed: task cancelled while the step ran", status, reason)
	}
	if took := finished.Sub(cancelled); took > stopBound {
		t.Errorf("the attempt ended %s after the cancel committed, want within %s", took, stopBound)
	}
	stop()
	evs, err := view.Timeline(context.Background(), h.db.Pool, env.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Kind != view.EventEnded || last.Status != task.Cancelled {
		t.Errorf("the timeline ends with %s %s, want ended cancelled: %+v", last.Kind, last.Status, evs)
	}
	if n := h.effects(env.TaskID); n != 0 {
		t.Errorf("%d effects of the stopped step committed", n)
	}
	if n := h.ready(wire.QueueDLQ) + h.stepMessages() + h.ready(wire.QueueASR); n != 0 {
		t.Errorf("%d messages left (dead letter, retry or redelivery) by a stopped step", n)
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want once", n)
	}
}

// TestHeartbeatStopsAStepWithoutTheNotification: with no watcher (a
// missed notification), the lease heartbeat's read stops the step within
// a third of the lease.
func TestHeartbeatStopsAStepWithoutTheNotification(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b := newBlocking()
	const lease = 1500 * time.Millisecond
	h.run(wire.QueueASR, route(b), func(c *step.Config) { c.Lease = lease })
	env := asrEnvelope(t)
	h.insertTask(env.TaskID, task.Running, "", nil)
	h.publish(env)
	<-b.started
	cancelled := h.cancelTask(env.TaskID)
	if cause := <-b.cause; !errors.Is(cause, fault.ErrTaskStopped) {
		t.Errorf("the step's context ended with %v, want fault.ErrTaskStopped", cause)
	}
	status, _, finished := h.closedAttempt(env.TaskID)
	if took := finished.Sub(cancelled); status != "failed" || took > lease/3+stopBound {
		t.Errorf("attempt ended %s %s after the cancel, want failed within a third of the lease", status, took)
	}
}

// TestNoAttemptOfAStoppedTask: a message of a task cancelled or failed —
// or of a child whose parent an operator cancelled — is acked without an
// attempt, a retry or a dead letter; a child of a parent its children
// ended cancelled is retried like any task, so its steps run.
func TestNoAttemptOfAStoppedTask(t *testing.T) {
	t.Parallel()
	h := setup(t)
	reg := prometheus.NewRegistry()
	var calls callLog
	_, stop := h.start(wire.QueueASR, route(effect(&calls)), withMetrics(reg), withWatch(h))
	defer stop()
	parent, concluded := uuid.New(), uuid.New()
	h.insertTask(parent, task.Cancelled, "cancelled: by an operator", nil)
	h.insertTask(concluded, task.Cancelled, "languages: es: cancelled: x", nil)
	stopped := map[string]*wire.Envelope{"cancelled": asrEnvelope(t), "failed": asrEnvelope(t), "child of a cancelled parent": asrEnvelope(t)}
	h.insertTask(stopped["cancelled"].TaskID, task.Cancelled, "cancelled: test", nil)
	h.insertTask(stopped["failed"].TaskID, task.Failed, "asr: boom", nil)
	h.insertTask(stopped["child of a cancelled parent"].TaskID, task.Running, "", &parent)
	retried := asrEnvelope(t)
	h.insertTask(retried.TaskID, task.Running, "", &concluded)
	for _, env := range stopped {
		h.publish(env)
	}
	h.publish(retried)
	testenv.EventuallyWithin(t, 20*time.Second, "every message settled", func() bool {
		return counted(t, reg, wire.StepASR, "ended") == float64(len(stopped)) && h.effects(retried.TaskID) == 1
	})
	stop()
	for name, env := range stopped {
		var n int
		if err := h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM task_steps WHERE task_id = $1`, env.TaskID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 || h.effects(env.TaskID) != 0 {
			t.Errorf("%s: %d attempts, %d effects; want none", name, n, h.effects(env.TaskID))
		}
	}
	if n := h.ready(wire.QueueDLQ) + h.stepMessages() + h.ready(wire.QueueASR); n != 0 {
		t.Errorf("%d messages left (dead letters, retries or redeliveries)", n)
	}
	if n := calls.len(); n != 1 {
		t.Errorf("handler ran %d times, want once (the retried child's)", n)
	}
}
