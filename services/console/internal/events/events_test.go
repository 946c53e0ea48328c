package events

import (
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// TestSubscribersGetTheirOwn: a task's subscriber gets that task's events,
// a project's subscriber its project's, an unscoped one all of them.
func TestSubscribersGetTheirOwn(t *testing.T) {
	t.Parallel()
	h := New(nil, zerolog.Nop())
	a, b := uuid.New(), uuid.New()
	one := h.Subscribe(a, "")
	proj := h.Subscribe(uuid.Nil, "p1")
	all := h.Subscribe(uuid.Nil, "")
	h.publish(TaskEvent(view.TaskChange{TaskID: a, Status: "running", Project: "p1"}))
	h.publish(TaskEvent(view.TaskChange{TaskID: b, Status: "running", Project: "p2"}))
	for name, c := range map[string]struct {
		s    *Subscriber
		want []uuid.UUID
	}{"task": {one, []uuid.UUID{a}}, "project": {proj, []uuid.UUID{a}}, "all": {all, []uuid.UUID{a, b}}} {
		if len(c.s.ch) != len(c.want) {
			t.Fatalf("%s: %d events, want %d", name, len(c.s.ch), len(c.want))
		}
		for _, id := range c.want {
			if ev := <-c.s.ch; ev.taskID != id || ev.kind != "task" {
				t.Errorf("%s: event %s of %s, want a task event of %s", name, ev.kind, ev.taskID, id)
			}
		}
	}
	h.Unsubscribe(one)
	h.Unsubscribe(one) // twice is harmless
	if _, open := <-one.ch; open {
		t.Error("an ended subscription's channel is open")
	}
}

// TestSlowSubscriberIsDropped: a subscriber subscriberBuffer events behind
// is dropped (its channel closed) rather than holding the others up.
func TestSlowSubscriberIsDropped(t *testing.T) {
	t.Parallel()
	h := New(nil, zerolog.Nop())
	slow := h.Subscribe(uuid.Nil, "")
	for range subscriberBuffer + 1 {
		h.publish(TaskEvent(view.TaskChange{TaskID: uuid.New(), Status: "running"}))
	}
	n := 0
	for range slow.ch {
		n++
	}
	if n != subscriberBuffer {
		t.Fatalf("the slow subscriber got %d events before its channel closed, want %d", n, subscriberBuffer)
	}
	if len(h.subs) != 0 {
		t.Fatalf("%d subscribers kept", len(h.subs))
	}
}

// TestEventsAreSortedByTheirChange: events are in the order of their
// changes, a task's after the steps of the same moment.
func TestEventsAreSortedByTheirChange(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_700_000_000, 0)
	id := uuid.New()
	task := TaskEvent(view.TaskChange{TaskID: id, UpdatedAt: at})
	step := stepEventOf(view.StepAttempt{TaskID: id, StartedAt: at.Add(-time.Second), FinishedAt: &at}, "")
	early := stepEventOf(view.StepAttempt{TaskID: id, StartedAt: at.Add(-2 * time.Second)}, "")
	evs := []Event{task, step, early}
	sortEvents(evs)
	if evs[0].at != early.at || evs[1].kind != "step" || evs[2].kind != "task" {
		t.Fatalf("order %s@%d %s@%d %s@%d, want the early step, the step, then the task",
			evs[0].kind, evs[0].at, evs[1].kind, evs[1].at, evs[2].kind, evs[2].at)
	}
}
