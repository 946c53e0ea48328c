package queue_test

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
)

// TestAttemptIsAtomicWithItsClaim: an attempt on an entry claims what it can
// (the project's head for a free agent) and records the attempt in one
// transaction. When recording the attempt fails (here a trigger refuses it),
// nothing of the attempt remains: no assignment, no load on the agent, no
// event, no counted attempt.
func TestAttemptIsAtomicWithItsClaim(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	project, staff := staffedProject(t, q, 1)
	head := enqueue(t, q, project, queue.UrgencyHigh)
	second := enqueue(t, q, project, queue.UrgencyNormal)

	// A fault between the claim and the attempt's record.
	exec(t, pool, `
		CREATE FUNCTION refuse_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected fault: attempt not recorded'; END $$;
		CREATE TRIGGER refuse_attempt BEFORE UPDATE ON visitor_waiting_queue
		FOR EACH ROW WHEN (NEW.retry_count <> OLD.retry_count) EXECUTE FUNCTION refuse_attempt();`)
	if _, err := q.Process(ctx, second.ID, false); err == nil {
		t.Fatal("Process succeeded although its attempt could not be recorded")
	}
	var assigned, load, events, attempts int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM visitor_waiting_queue WHERE status <> 'waiting'),
		(SELECT current_load FROM staff WHERE id = $1),
		(SELECT count(*) FROM outbox),
		(SELECT coalesce(sum(retry_count), 0) FROM visitor_waiting_queue)`, staff).
		Scan(&assigned, &load, &events, &attempts); err != nil {
		t.Fatal(err)
	}
	if assigned != 0 || load != 0 || events != 0 || attempts != 0 {
		t.Fatalf("after a failed attempt: %d entries left the queue, agent load %d, %d events, %d attempts counted; want all 0",
			assigned, load, events, attempts)
	}

	// Without the fault the same attempt serves the head and counts itself.
	exec(t, pool, `DROP TRIGGER refuse_attempt ON visitor_waiting_queue`)
	out, err := q.Process(ctx, second.ID, false)
	if err != nil || len(out.Assigned) != 1 || out.Assigned[0].ID != head.ID ||
		out.Entry.Status != queue.StatusWaiting || out.Entry.RetryCount != 1 || out.Entry.Position != 1 {
		t.Fatalf("attempt: %+v, %v", out, err)
	}
}
