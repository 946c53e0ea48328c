package step_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestRefusedBeforeTheClaim: a message whose routing key names another
// step than its envelope, and one its route's Admit refuses, are
// dead-lettered as invalid without reaching the handler and without a step
// row, so a corrected message with the same task id and attempt runs
// (it is not taken for a duplicate).
func TestRefusedBeforeTheClaim(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var calls callLog
	admit := func(env *wire.Envelope) error {
		if strings.Contains(string(env.Payload), "refuse-me") {
			return errors.New("reason refused by the route")
		}
		return nil
	}
	h.run(wire.QueueWaiting, []step.Route{
		{Step: wire.StepWaitingEnqueue, Timeout: 30 * time.Second, Handler: effect(&calls), Admit: admit},
		{Step: wire.StepWaitingCancel, Timeout: 30 * time.Second, Handler: effect(&calls)},
	})
	id := uuid.New()
	enqueue := func(reason string) []byte {
		env, err := wire.New(wire.StepWaitingEnqueue, id, "", map[string]any{
			"project_id": uuid.New(), "visitor_id": uuid.New(), "reason": reason})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(env)
		return body
	}
	for _, c := range []struct {
		name, key string
		body      []byte
		reason    string
	}{
		{"routing key of another step", wire.RoutingKey(wire.StepWaitingCancel), enqueue("fine"), "routing key waiting.cancel"},
		{"refused by Admit", wire.RoutingKey(wire.StepWaitingEnqueue), enqueue("refuse-me"), "reason refused by the route"},
	} {
		h.publishRaw(c.key, c.body)
		dl := h.deadLetter(20 * time.Second)
		if dl.ErrorClass != wire.ClassInvalid || !strings.Contains(dl.FailureReason, c.reason) || dl.RetryCount != 0 {
			t.Errorf("%s: dead letter %s %q (retries %d), want invalid saying %q", c.name, dl.ErrorClass, dl.FailureReason, dl.RetryCount, c.reason)
		}
		var rows int
		if err := h.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM task_steps WHERE task_id = $1`, id).Scan(&rows); err != nil || rows != 0 {
			t.Fatalf("%s: %d step rows (%v), want none", c.name, rows, err)
		}
	}
	h.publishRaw(wire.RoutingKey(wire.StepWaitingEnqueue), enqueue("fine"))
	testenv.EventuallyWithin(t, 20*time.Second, "the corrected message to run", func() bool { return h.effects(id) == 1 })
	if calls.len() != 1 {
		t.Fatalf("handler calls = %d, want 1", calls.len())
	}
}
