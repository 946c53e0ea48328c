package step_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// hostileBody is what a broken engine may answer: NUL bytes and invalid
// UTF-8, which Postgres refuses in a text value.
const hostileBody = "engine says:\x00 bad\xff\xfe input \xc3\x28 end"

// apyServer speaks the Apertium APy protocol (pkg/speech.APy): it answers
// each text with the status the test assigned to it, with hostileBody on
// errors, and translates every other text.
type apyServer struct {
	mu     sync.Mutex
	status map[string]int
}

func (s *apyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	s.mu.Lock()
	code := s.status[q]
	s.mu.Unlock()
	if code != 0 {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(hostileBody))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"responseData": map[string]string{"translatedText": "traducido " + q}, "responseStatus": 200})
}

// translateEnvelope returns the translate message of one segment of a new
// task, and inserts the task.
func (h *harness) translateEnvelope() *wire.Envelope {
	h.t.Helper()
	id := uuid.New()
	env, err := wire.New(wire.StepTranslate, id, "", wire.Translate{TaskID: id, SegmentIDs: []string{"seg-0"},
		SourceLanguage: "en", TargetLanguage: "es", BatchSize: 20})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status) VALUES ($1, 'running')`, id); err != nil {
		h.t.Fatal(err)
	}
	return env
}

func (h *harness) task(id uuid.UUID) (status, errText string) {
	h.t.Helper()
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT status, error FROM tasks WHERE id = $1`, id).Scan(&status, &errText); err != nil {
		h.t.Fatal(err)
	}
	return status, errText
}

// readable reports whether s is text Postgres and a reader can take.
func readable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// TestEngineErrorWithNULsAndInvalidUTF8EndsTheTask: a remote engine that
// answers 400 or 500 with a body Postgres cannot store must not make the step
// loop forever: the task ends failed with a readable reason, the message
// reaches task.dlq, and the worker keeps serving.
func TestEngineErrorWithNULsAndInvalidUTF8EndsTheTask(t *testing.T) {
	t.Parallel()
	h := setup(t)
	engine := &apyServer{status: map[string]int{}}
	srv := httptest.NewServer(engine)
	t.Cleanup(srv.Close)
	apy := speech.NewAPy(srv.URL)
	h.run(wire.QueueTranslate, []step.Route{{Step: wire.StepTranslate, Timeout: 30 * time.Second,
		Handler: step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
			out, err := apy.Translate(ctx, []string{msg.Envelope.TaskID.String()}, "en", "es")
			if err != nil {
				return fmt.Errorf("translate: %w", err)
			}
			msg.Exec(`INSERT INTO effects (task_id, step, part) VALUES ($1, $2, $3)`, msg.Envelope.TaskID, out[0], msg.Part)
			return nil
		})}}, func(c *step.Config) { c.Backoff = func(int) time.Duration { return time.Second } })

	for _, tc := range []struct {
		status int
		class  string
	}{{http.StatusBadRequest, wire.ClassPermanent}, {http.StatusInternalServerError, wire.ClassTransient}} {
		env := h.translateEnvelope()
		engine.mu.Lock()
		engine.status[env.TaskID.String()] = tc.status
		engine.mu.Unlock()
		h.publish(env)
		dl := h.deadLetter(60 * time.Second)
		if dl.TaskID != env.TaskID || dl.ErrorClass != tc.class || !readable(dl.FailureReason) ||
			!strings.Contains(dl.FailureReason, fmt.Sprintf("http %d: engine says:", tc.status)) {
			t.Errorf("http %d: dead letter task %s class %q reason %q", tc.status, dl.TaskID, dl.ErrorClass, dl.FailureReason)
		}
		status, reason := h.task(env.TaskID)
		if status != "failed" || !readable(reason) || !strings.Contains(reason, fmt.Sprintf("http %d", tc.status)) {
			t.Errorf("http %d: task %s %q, want failed with a readable reason", tc.status, status, reason)
		}
		var stepErr string
		if err := h.db.Pool.QueryRow(context.Background(), `SELECT error FROM task_steps
			WHERE task_id = $1 ORDER BY attempt DESC LIMIT 1`, env.TaskID).Scan(&stepErr); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stepErr, "engine says:\uFFFD bad\uFFFD input") {
			t.Errorf("http %d: recorded step error %q", tc.status, stepErr)
		}
	}
	good := h.translateEnvelope()
	h.publish(good)
	testenv.EventuallyWithin(t, 30*time.Second, "the next task to be served", func() bool { return h.effects(good.TaskID) == 1 })
}

// TestCommitThatKeepsFailingUsesTheBudget: a step whose outcome cannot be
// committed (here a staged statement that always fails) is retried within
// its budget and then dead-lettered with the reason, never re-run forever.
func TestCommitThatKeepsFailingUsesTheBudget(t *testing.T) {
	t.Parallel()
	var calls callLog
	h, env := serveASR(t, route(recorded(&calls, func(msg *step.Message) error {
		msg.Exec(`INSERT INTO effects (task_id, step) VALUES ($1, NULL)`, msg.Envelope.TaskID)
		return nil
	})), func(c *step.Config) { c.Backoff = func(int) time.Duration { return time.Second } })
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status) VALUES ($1, 'running')`, env.TaskID); err != nil {
		t.Fatal(err)
	}
	h.publish(env)
	dl := h.deadLetter(60 * time.Second)
	if dl.Attempt != 4 || !strings.Contains(dl.FailureReason, "commit succeeded outcome") ||
		!strings.Contains(dl.FailureReason, "not-null") {
		t.Errorf("dead letter attempt %d reason %q, want attempt 4 naming the failed commit", dl.Attempt, dl.FailureReason)
	}
	if status, reason := h.task(env.TaskID); status != "failed" || !strings.Contains(reason, "commit") {
		t.Errorf("task %s %q, want failed naming the commit", status, reason)
	}
	if n := calls.len(); n != 4 {
		t.Errorf("handler calls = %d, want 4 (the first try and 3 retries)", n)
	}
}

// TestStepHeldPastAnyStepTimeoutIsDeadLettered: a message whose attempt is
// held by another worker that never finishes (its lease kept alive) is not
// republished through the delay tiers forever: past the step timeout and a
// few leases it is dead-lettered with the reason.
func TestStepHeldPastAnyStepTimeoutIsDeadLettered(t *testing.T) {
	t.Parallel()
	var calls callLog
	h, env := serveASR(t, []step.Route{{Step: wire.StepASR, Timeout: 2 * time.Second, Handler: effect(&calls)}},
		func(c *step.Config) { c.Lease = time.Second })
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO task_steps (task_id, step, attempt, status, worker, lease_until)
		VALUES ($1, 'asr', 1, 'running', 'stuck-worker', now() + interval '1 hour')`, env.TaskID); err != nil {
		t.Fatal(err)
	}
	h.publish(env)
	dl := h.deadLetter(60 * time.Second)
	if !strings.Contains(dl.FailureReason, "held by another attempt") {
		t.Errorf("dead letter reason %q", dl.FailureReason)
	}
	if calls.len() != 0 {
		t.Errorf("handler ran %d times beside the holder", calls.len())
	}
}

// TestHandBacksCarriedPastTheLimitAreDeadLettered: the hand-backs a message
// carries across delay tiers count against the delivery limit.
func TestHandBacksCarriedPastTheLimitAreDeadLettered(t *testing.T) {
	t.Parallel()
	var calls callLog
	h, env := serveASR(t, route(effect(&calls)), func(c *step.Config) { c.DeliveryLimit = 5 })
	body, _ := env.Marshal()
	msg := amqpPublishing(body)
	msg.Headers = amqp.Table{"x-dubflow-hand-backs": int64(5)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.pub.Publish(ctx, wire.Exchange, wire.QueueASR, msg); err != nil {
		t.Fatal(err)
	}
	dl := h.deadLetter(30 * time.Second)
	if dl.TaskID != env.TaskID || !strings.Contains(dl.FailureReason, "handed back 5 times") {
		t.Errorf("dead letter task %s reason %q", dl.TaskID, dl.FailureReason)
	}
	if calls.len() != 0 {
		t.Errorf("handler ran %d times", calls.len())
	}
}
