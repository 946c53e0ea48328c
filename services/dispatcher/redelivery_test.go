package main

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
)

// TestAttemptCommitsWithTheStep: a waiting.process message whose success
// commit fails once is run again; the attempt it records commits with the
// step's success, so it counts once, not once per run.
func TestAttemptCommitsWithTheStep(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	ctx := context.Background()
	q := queue.New(db.Pool, queue.Config{MaxRetries: 10, RetryDelay: time.Hour})
	e, err := q.Enqueue(ctx, queue.EnqueueRequest{ProjectID: uuid.New(), VisitorID: uuid.New(),
		Source: queue.SourceVisitor, Urgency: queue.UrgencyNormal})
	if err != nil {
		t.Fatal(err)
	}
	// The first success commit of waiting_process fails (a sequence is not
	// rolled back with it, so the second one passes).
	if _, err := db.Pool.Exec(ctx, `
		CREATE SEQUENCE fail_once;
		CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('fail_once') = 1 THEN RAISE EXCEPTION 'injected fault: success commit fails once'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER fail_once BEFORE UPDATE ON task_steps FOR EACH ROW
		WHEN (NEW.status = 'succeeded' AND NEW.step = 'waiting_process') EXECUTE FUNCTION fail_once();`); err != nil {
		t.Fatal(err)
	}
	startInProcess(t, testEnv(t, db.URL, amqpURL, map[string]string{
		"QUEUE_PROCESS_ENABLED": "false", "QUEUE_PROCESS_MAX_RETRIES": "10", "STEP_LEASE_SECONDS": "3"}))
	task := uuid.New()
	publish(t, amqpURL, wire.StepWaitingProcess, task, map[string]any{"entry_id": e.ID})
	testenv.EventuallyWithin(t, 20*time.Second, "the step succeeded after its failed commit", func() bool {
		var n int
		var failed int64
		if err := db.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM task_steps WHERE task_id = $1 AND status = 'succeeded'),
			(SELECT last_value FROM fail_once)`, task).Scan(&n, &failed); err != nil {
			t.Fatal(err)
		}
		return n == 1 && failed >= 2
	})
	got, err := q.Entry(ctx, e.ID)
	if err != nil || got.RetryCount != 1 {
		t.Fatalf("attempts recorded for one waiting.process step run twice: %d (%v), want 1", got.RetryCount, err)
	}
}
