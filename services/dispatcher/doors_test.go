package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// doors reaches the dispatcher through both of its doors: the HTTP API
// and raw task.waiting_queue messages (built by hand, not by wire.New,
// which refuses what a careless producer would send).
type doors struct {
	d   dispatcher
	ch  *amqp.Channel
	db  *testenv.Database
	url string
}

// publishRaw publishes a waiting envelope under routing key.
func (o doors) publishRaw(t *testing.T, key, step, taskID string, payload any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"task_id": taskID, "step": step, "attempt": 1, "trace_id": "trace-doors",
		"created_at": time.Now().UTC().Format(time.RFC3339), "payload": payload})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.ch.Publish(wire.Exchange, key, true, false, amqp.Publishing{ContentType: "application/json", Body: body}); err != nil {
		t.Fatal(err)
	}
}

// deadLetter waits for the next dead letter.
func (o doors) deadLetter(t *testing.T) *wire.DeadLetter {
	t.Helper()
	var dl *wire.DeadLetter
	testenv.EventuallyWithin(t, 20*time.Second, "a dead letter", func() bool {
		d, ok, err := o.ch.Get(wire.QueueDLQ, true)
		if err != nil || !ok {
			return false
		}
		if dl, err = wire.DecodeDeadLetter(d.Body); err != nil {
			t.Fatalf("dead letter %s: %v", d.Body, err)
		}
		return true
	})
	return dl
}

func (o doors) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := o.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func openDoors(t *testing.T) doors {
	t.Helper()
	db := testenv.Postgres(t)
	url := testenv.AMQP(t)
	d := startInProcess(t, testEnv(t, db.URL, url, nil))
	return doors{d: d, ch: brokertest.Channel(t, url), db: db, url: url}
}

// TestBothDoorsRefuseTheSameRequests runs one table of bad requests for a
// human agent through POST /internal/ai/events and waiting.enqueue: each is
// a 400 VALIDATION_ERROR over HTTP and dead-lettered at once as invalid
// over AMQP, with no entry and no step row.
func TestBothDoorsRefuseTheSameRequests(t *testing.T) {
	t.Parallel()
	o := openDoors(t)
	for _, c := range badAsks() {
		project, visitor := uuid.NewString(), uuid.NewString()
		payload := map[string]any{"project_id": project, "visitor_id": visitor}
		for k, v := range c.payload {
			payload[k] = v
		}
		for k, v := range c.ids {
			payload[k] = v
		}
		var e entryJSON
		event := map[string]any{"event_type": "manual_service.request", "project_id": payload["project_id"],
			"visitor_id": payload["visitor_id"], "payload": c.payload}
		if code := o.d.call(t, "POST", "/internal/ai/events", event, &e); code != 400 || e.Code != "VALIDATION_ERROR" ||
			!strings.Contains(e.Error, c.reason) {
			t.Errorf("%s over HTTP: %d %s %q, want 400 VALIDATION_ERROR about %s", c.name, code, e.Code, e.Error, c.reason)
		}
		task := uuid.NewString()
		o.publishRaw(t, "waiting.enqueue", wire.StepWaitingEnqueue, task, payload)
		dl := o.deadLetter(t)
		if dl.ErrorClass != wire.ClassInvalid || dl.RetryCount != 0 || !strings.Contains(dl.FailureReason, c.reason) {
			t.Errorf("%s over AMQP: dead letter %s after %d retries: %q, want invalid at once about %s",
				c.name, dl.ErrorClass, dl.RetryCount, dl.FailureReason, c.reason)
		}
		if n := o.count(t, `SELECT count(*) FROM task_steps WHERE task_id = $1`, task); n != 0 {
			t.Errorf("%s over AMQP: %d step rows, want none", c.name, n)
		}
	}
	if n := o.count(t, `SELECT count(*) FROM visitor_waiting_queue`); n != 0 {
		t.Fatalf("%d entries after refused requests, want none", n)
	}
}

// TestRefusedMessageLeavesNothingBehind: a refused waiting.enqueue's
// corrected copy (same task_id, same attempt) runs; and limits count
// characters on both doors.
func TestRefusedMessageLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	o := openDoors(t)
	// A refused message left nothing that makes its corrected copy (same
	// task_id, same attempt) a duplicate.
	fixed := uuid.NewString()
	ask := map[string]any{"project_id": uuid.NewString(), "visitor_id": uuid.NewString(), "reason": "needs\x00help"}
	o.publishRaw(t, "waiting.enqueue", wire.StepWaitingEnqueue, fixed, ask)
	if dl := o.deadLetter(t); dl.ErrorClass != wire.ClassInvalid {
		t.Fatalf("dead letter %s", dl.ErrorClass)
	}
	ask["reason"] = "needs help"
	o.publishRaw(t, "waiting.enqueue", wire.StepWaitingEnqueue, fixed, ask)
	testenv.EventuallyWithin(t, 20*time.Second, "the corrected message's entry", func() bool {
		var e entryJSON
		return o.d.call(t, "GET", "/queue/entries/"+fixed, nil, &e) == 200 && e.Status == "waiting"
	})
	// Limits count characters: 255 CJK characters of reason (765 bytes)
	// and a channel of 255 are taken by both doors.
	long := map[string]any{"reason": strings.Repeat("字", 255), "session_id": strings.Repeat("频", 255) + "@1"}
	var e entryJSON
	if code := o.d.call(t, "POST", "/internal/ai/events", map[string]any{"event_type": "manual_service.request",
		"project_id": uuid.New(), "visitor_id": uuid.New(), "payload": long}, &e); code != 200 {
		t.Fatalf("255 characters over HTTP: %d %+v", code, e)
	}
	task := uuid.NewString()
	long["project_id"], long["visitor_id"] = uuid.NewString(), uuid.NewString()
	o.publishRaw(t, "waiting.enqueue", wire.StepWaitingEnqueue, task, long)
	testenv.EventuallyWithin(t, 20*time.Second, "255 characters over AMQP", func() bool {
		return o.d.call(t, "GET", "/queue/entries/"+task, nil, &e) == 200
	})
}

// badAsk is a request for a human agent that both doors must refuse:
// payload fields beside the ids, ids to replace, and a word the refusal
// must say.
type badAsk struct {
	name    string
	payload map[string]any
	ids     map[string]string
	reason  string
}

func badAsks() []badAsk {
	id := uuid.NewString()
	return []badAsk{
		{"nil project", nil, map[string]string{"project_id": uuid.Nil.String()}, "project_id"},
		{"nil visitor", nil, map[string]string{"visitor_id": uuid.Nil.String()}, "visitor_id"},
		{"braced visitor", nil, map[string]string{"visitor_id": "{" + id + "}"}, "visitor_id"},
		{"urn visitor", nil, map[string]string{"visitor_id": "urn:uuid:" + id}, "visitor_id"},
		{"unhyphenated project", nil, map[string]string{"project_id": strings.ReplaceAll(id, "-", "")}, "project_id"},
		{"NUL in reason", map[string]any{"reason": "needs\x00help"}, nil, "reason"},
		{"escape in reason", map[string]any{"reason": "\x1b[2Jhelp"}, nil, "reason"},
		{"newline in reason", map[string]any{"reason": "two\nlines"}, nil, "reason"},
		{"NUL in visitor_message", map[string]any{"visitor_message": "hi\x00"}, nil, "visitor_message"},
		{"NUL in a metadata value", map[string]any{"metadata": map[string]any{"k": []any{"ok", "a\x00"}}}, nil, "metadata"},
		{"NUL in a metadata key", map[string]any{"metadata": map[string]any{"k\x00": 1}}, nil, "control character"},
		{"metadata of 16 KiB", map[string]any{"metadata": map[string]any{"k": strings.Repeat("v", 16400)}}, nil, "metadata"},
		{"256 characters of reason", map[string]any{"reason": strings.Repeat("字", 256)}, nil, "reason"},
		{"65537 characters of visitor_message", map[string]any{"visitor_message": strings.Repeat("m", 65537)}, nil, "visitor_message"},
		{"control character in session_id", map[string]any{"session_id": "chan\x01@1"}, nil, "session_id"},
	}
}

// TestNilTaskIDLosesNoVisitor is the case: waiting.enqueue with
// the nil UUID as task_id, for two visitors. Each message is dead-lettered
// (none taken for a duplicate of the other, none recorded under the nil
// id), and no entry is made under a random id.
func TestNilTaskIDLosesNoVisitor(t *testing.T) {
	t.Parallel()
	o := openDoors(t)
	project := uuid.NewString()
	for range 2 {
		o.publishRaw(t, "waiting.enqueue", wire.StepWaitingEnqueue, uuid.Nil.String(),
			map[string]any{"project_id": project, "visitor_id": uuid.NewString()})
		dl := o.deadLetter(t)
		if dl.ErrorClass != wire.ClassInvalid || !strings.Contains(dl.FailureReason, "task_id: must not be the nil UUID") {
			t.Fatalf("dead letter %s %q, want invalid naming the nil task_id", dl.ErrorClass, dl.FailureReason)
		}
	}
	for _, sql := range []string{`SELECT count(*) FROM task_steps`, `SELECT count(*) FROM visitor_waiting_queue`} {
		if n := o.count(t, sql); n != 0 {
			t.Fatalf("%s = %d, want 0", sql, n)
		}
	}
	// Every other waiting step refuses a nil or non-canonical id alike.
	for _, c := range []struct {
		step    string
		payload map[string]any
	}{
		{wire.StepWaitingCancel, map[string]any{"entry_id": uuid.Nil.String()}},
		{wire.StepWaitingProcess, map[string]any{"entry_id": "{" + uuid.NewString() + "}"}},
		{wire.StepWaitingCapacity, map[string]any{"staff_id": uuid.Nil.String(), "action": "release"}},
		{wire.StepWaitingCapacity, map[string]any{"staff_id": uuid.NewString(), "action": "set",
			"project_id": strings.ReplaceAll(uuid.NewString(), "-", ""), "availability": "online", "max_concurrent": 1}},
	} {
		o.publishRaw(t, wire.RoutingKey(c.step), c.step, uuid.NewString(), c.payload)
		if dl := o.deadLetter(t); dl.ErrorClass != wire.ClassInvalid {
			t.Errorf("%s %v: dead letter %s %q, want invalid", c.step, c.payload, dl.ErrorClass, dl.FailureReason)
		}
	}
	if n := o.count(t, `SELECT count(*) FROM task_steps`); n != 0 {
		t.Fatalf("%d step rows after refused messages", n)
	}
}

// TestRoutingKeyAndStepMustAgree: a waiting_enqueue envelope published as
// waiting.cancel is refused, not run as an enqueue.
func TestRoutingKeyAndStepMustAgree(t *testing.T) {
	t.Parallel()
	o := openDoors(t)
	task := uuid.NewString()
	o.publishRaw(t, "waiting.cancel", wire.StepWaitingEnqueue, task,
		map[string]any{"project_id": uuid.NewString(), "visitor_id": uuid.NewString()})
	dl := o.deadLetter(t)
	if dl.ErrorClass != wire.ClassInvalid || !strings.Contains(dl.FailureReason, "routing key waiting.cancel") {
		t.Fatalf("dead letter %s %q, want invalid naming the routing key", dl.ErrorClass, dl.FailureReason)
	}
	if n := o.count(t, `SELECT count(*) FROM visitor_waiting_queue`); n != 0 {
		t.Fatalf("%d entries: the message ran", n)
	}
	// Under its own routing key the same message runs.
	o.publishRaw(t, "waiting.enqueue", wire.StepWaitingEnqueue, task,
		map[string]any{"project_id": uuid.NewString(), "visitor_id": uuid.NewString()})
	var e entryJSON
	testenv.EventuallyWithin(t, 20*time.Second, "the entry", func() bool {
		return o.d.call(t, "GET", "/queue/entries/"+task, nil, &e) == 200
	})
}

// TestBusyAgentMoveIsRefusedOverAMQP: waiting.capacity "set" moving an
// agent that holds a conversation is a permanent refusal (dead-lettered,
// not retried), as PUT /staff/{id} answers 409.
func TestBusyAgentMoveIsRefusedOverAMQP(t *testing.T) {
	t.Parallel()
	o := openDoors(t)
	project, staff := uuid.New(), uuid.New()
	o.d.call(t, "PUT", "/staff/"+staff.String(), map[string]any{"project_id": project, "availability": "online", "max_concurrent": 1}, nil)
	var e entryJSON
	if code := o.d.call(t, "POST", "/internal/ai/events", aiEvent(project, uuid.New(), "normal"), &e); code != 200 || e.Status != "assigned" {
		t.Fatalf("enqueue: %d %+v", code, e)
	}
	o.publishRaw(t, "waiting.capacity", wire.StepWaitingCapacity, uuid.NewString(), map[string]any{
		"staff_id": staff, "action": "set", "project_id": uuid.New(), "availability": "online", "max_concurrent": 1})
	dl := o.deadLetter(t)
	if dl.ErrorClass != wire.ClassPermanent || dl.RetryCount != 0 || !strings.Contains(dl.FailureReason, "open conversation") {
		t.Fatalf("dead letter %s after %d retries: %q, want permanent at once", dl.ErrorClass, dl.RetryCount, dl.FailureReason)
	}
	var st staffJSON
	if o.d.call(t, "GET", "/staff/"+staff.String(), nil, &st); st.ProjectID != project {
		t.Fatalf("agent moved: %+v", st)
	}
}
