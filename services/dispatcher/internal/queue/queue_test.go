package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// setup returns a Queue on a fresh database.
func setup(t *testing.T, cfg queue.Config) (*queue.Queue, *pgxpool.Pool) {
	t.Helper()
	db := testenv.Postgres(t)
	return queue.New(db.Pool, cfg), db.Pool
}

var defaultConfig = queue.Config{MaxRetries: 3, RetryDelay: time.Hour, BatchSize: 50, MaxWorkers: 5}

func enqueue(t *testing.T, q *queue.Queue, project uuid.UUID, urgency queue.Urgency) queue.Entry {
	t.Helper()
	e, err := q.Enqueue(context.Background(), queue.EnqueueRequest{
		ProjectID: project, VisitorID: uuid.New(), Source: queue.SourceVisitor, Urgency: urgency,
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return e
}

func putStaff(t *testing.T, q *queue.Queue, id, project uuid.UUID, a queue.Availability, max int) {
	t.Helper()
	if _, err := q.PutStaff(context.Background(), queue.StaffUpdate{ID: id, ProjectID: project, Availability: a, MaxConcurrent: max}); err != nil {
		t.Fatalf("put staff: %v", err)
	}
}

// staffedProject returns a new project served by one online agent who
// takes max conversations at once.
func staffedProject(t *testing.T, q *queue.Queue, max int) (project, staff uuid.UUID) {
	t.Helper()
	project, staff = uuid.New(), uuid.New()
	putStaff(t, q, staff, project, queue.Online, max)
	return project, staff
}

// exec runs a statement that sets up or bends a test's rows.
func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// concurrently runs f n times at once and waits for all of them.
func concurrently(n int, f func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(f)
	}
	wg.Wait()
}

func TestDuplicateEnqueueIsRefusedWhileWaiting(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, defaultConfig)
	ctx := context.Background()
	project, visitor := uuid.New(), uuid.New()
	req := queue.EnqueueRequest{ProjectID: project, VisitorID: visitor, Source: queue.SourceAIRequest, Urgency: queue.UrgencyHigh}
	first, err := q.Enqueue(ctx, req)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if first.Status != queue.StatusWaiting || first.Position != 1 || first.Priority != 2 {
		t.Fatalf("first entry = %s position %d priority %d, want waiting 1 2", first.Status, first.Position, first.Priority)
	}
	_, err = q.Enqueue(ctx, req)
	var dup *queue.DuplicateError
	if !errors.As(err, &dup) || dup.Existing.ID != first.ID {
		t.Fatalf("second enqueue: err = %v, want DuplicateError naming %s", err, first.ID)
	}
	// Replaying the same entry id returns the entry instead of a duplicate.
	req.ID = first.ID
	again, err := q.Enqueue(ctx, req)
	if err != nil || again.ID != first.ID {
		t.Fatalf("replayed enqueue: %v, %v", again.ID, err)
	}
	// Once the entry is cancelled the visitor may queue again.
	if _, err := q.Cancel(ctx, first.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	req.ID = uuid.Nil
	if _, err := q.Enqueue(ctx, req); err != nil {
		t.Fatalf("enqueue after cancel: %v", err)
	}
}

func TestCancelIsIdempotentAndOnlyWhileWaiting(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, defaultConfig)
	ctx := context.Background()
	project := uuid.New()
	a, b := enqueue(t, q, project, queue.UrgencyNormal), enqueue(t, q, project, queue.UrgencyNormal)
	for i := 0; i < 2; i++ {
		e, err := q.Cancel(ctx, a.ID)
		if err != nil || e.Status != queue.StatusCancelled || e.Position != 0 {
			t.Fatalf("cancel #%d: status %s position %d err %v", i+1, e.Status, e.Position, err)
		}
	}
	if e, _ := q.Entry(ctx, b.ID); e.Position != 1 {
		t.Fatalf("position of the next entry after cancel = %d, want 1", e.Position)
	}
	putStaff(t, q, uuid.New(), project, queue.Online, 1)
	if got, err := q.Match(ctx, project); err != nil || len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("match: %v %v", got, err)
	}
	if _, err := q.Cancel(ctx, b.ID); !errors.Is(err, queue.ErrNotWaiting) {
		t.Fatalf("cancel assigned: err = %v, want ErrNotWaiting", err)
	}
	if _, err := q.Cancel(ctx, uuid.New()); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("cancel unknown: err = %v, want ErrNotFound", err)
	}
}

func TestReleaseAssignsByPriorityThenArrival(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	project := uuid.New()
	low := enqueue(t, q, project, queue.UrgencyLow)
	normal1 := enqueue(t, q, project, queue.UrgencyNormal)
	urgent := enqueue(t, q, project, queue.UrgencyUrgent)
	normal2 := enqueue(t, q, project, queue.UrgencyNormal)
	want := []uuid.UUID{urgent.ID, normal1.ID, normal2.ID, low.ID}
	st, err := q.Status(ctx, project, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range st.Entries {
		if e.ID != want[i] || e.Position != i+1 {
			t.Fatalf("entry %d = %s at %d, want %s at %d", i, e.ID, e.Position, want[i], i+1)
		}
	}
	staff := uuid.New()
	putStaff(t, q, staff, project, queue.Away, 1)
	if got, _ := q.Match(ctx, project); len(got) != 0 {
		t.Fatalf("an away agent got %d assignments", len(got))
	}
	putStaff(t, q, staff, project, queue.Online, 1)
	for i, id := range want {
		got, err := q.Match(ctx, project)
		if err != nil || len(got) != 1 || got[0].ID != id || *got[0].AssignedStaffID != staff {
			t.Fatalf("assignment %d: got %+v (err %v), want entry %s", i, got, err, id)
		}
		if again, _ := q.Match(ctx, project); len(again) != 0 {
			t.Fatalf("agent at capacity got another assignment")
		}
		if s, err := q.Release(ctx, staff); err != nil || s.CurrentLoad != 0 {
			t.Fatalf("release: load %d, err %v", s.CurrentLoad, err)
		}
	}
	if _, err := q.Release(ctx, staff); !errors.Is(err, queue.ErrNothingToRelease) {
		t.Fatalf("release idle agent: err = %v", err)
	}
	var events int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE routing_key = $1`, queue.EventAssigned).Scan(&events); err != nil || events != 4 {
		t.Fatalf("assigned events in outbox = %d (%v), want 4", events, err)
	}
}

func TestAgentChoiceMostFreeCapacityThenIdleLongest(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, defaultConfig)
	ctx := context.Background()
	project := uuid.New()
	small, big1, big2 := uuid.New(), uuid.New(), uuid.New()
	putStaff(t, q, small, project, queue.Online, 1)
	putStaff(t, q, big1, project, queue.Online, 3)
	putStaff(t, q, big2, project, queue.Online, 3)
	var got []uuid.UUID
	for i := 0; i < 4; i++ {
		enqueue(t, q, project, queue.UrgencyNormal)
		a, err := q.Match(ctx, project)
		if err != nil || len(a) != 1 {
			t.Fatalf("match %d: %v %v", i, a, err)
		}
		got = append(got, *a[0].AssignedStaffID)
	}
	// big1 and big2 tie on free capacity (3); big1 came online first, so it
	// has been idle longest. Then big2 (3 free) beats big1 (2 free), then the
	// two tie at 2 and big1 has been idle longer again.
	want := []uuid.UUID{big1, big2, big1, big2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("assignment %d went to %s, want %s (order %v)", i, got[i], want[i], got)
		}
	}
}

func TestConcurrentMatchersNeverOverAssign(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	project := uuid.New()
	for i := 0; i < 4; i++ {
		putStaff(t, q, uuid.New(), project, queue.Online, 2)
	}
	concurrently(40, func() {
		e, err := q.Enqueue(ctx, queue.EnqueueRequest{ProjectID: project, VisitorID: uuid.New(), Source: queue.SourceVisitor, Urgency: queue.UrgencyNormal})
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := q.Process(ctx, e.ID, false); err != nil {
			t.Error(err)
		}
	})
	var assigned, overloaded int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM visitor_waiting_queue WHERE status = 'assigned'`).Scan(&assigned); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM staff s WHERE current_load > max_concurrent
		OR current_load <> (SELECT count(*) FROM visitor_waiting_queue w WHERE w.assigned_staff_id = s.id)`).Scan(&overloaded); err != nil {
		t.Fatal(err)
	}
	if assigned != 8 || overloaded != 0 {
		t.Fatalf("assigned %d (want 8), agents over capacity or miscounted %d", assigned, overloaded)
	}
}

func TestRetriesThenExpiry(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	project := uuid.New()
	e := enqueue(t, q, project, queue.UrgencyNormal)
	// The trigger on enqueue is the first attempt.
	out, err := q.Process(ctx, e.ID, false)
	if err != nil || out.Entry.RetryCount != 1 || out.Entry.Status != queue.StatusWaiting {
		t.Fatalf("first attempt: %+v %v", out.Entry, err)
	}
	// Within the retry delay a scan leaves the entry alone.
	if res, err := q.Scan(ctx); err != nil || len(res.Expired) != 0 {
		t.Fatalf("scan: %+v %v", res, err)
	}
	if got, _ := q.Entry(ctx, e.ID); got.RetryCount != 1 {
		t.Fatalf("retry_count after an early scan = %d, want 1", got.RetryCount)
	}
	backdate := func() {
		t.Helper()
		exec(t, pool, `UPDATE visitor_waiting_queue SET last_attempt_at = now() - interval '2 hours'`)
	}
	backdate()
	if _, err := q.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.Entry(ctx, e.ID); got.RetryCount != 2 || got.Status != queue.StatusWaiting {
		t.Fatalf("after second attempt: %d %s", got.RetryCount, got.Status)
	}
	backdate()
	res, err := q.Scan(ctx)
	if err != nil || len(res.Expired) != 1 || res.Expired[0].ID != e.ID {
		t.Fatalf("third attempt should expire the entry: %+v %v", res, err)
	}
	got, _ := q.Entry(ctx, e.ID)
	if got.Status != queue.StatusExpired || got.RetryCount != 3 || got.ExitedAt == nil {
		t.Fatalf("expired entry: %+v", got)
	}
	var events int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE routing_key = $1`, queue.EventExpired).Scan(&events); err != nil || events != 1 {
		t.Fatalf("expired events = %d (%v), want 1", events, err)
	}
	// An expired entry is no longer active: the visitor may queue again.
	if _, err := q.Enqueue(ctx, queue.EnqueueRequest{ProjectID: project, VisitorID: got.VisitorID, Source: queue.SourceVisitor, Urgency: queue.UrgencyLow}); err != nil {
		t.Fatalf("enqueue after expiry: %v", err)
	}
}

func TestScanIsFairAcrossProjects(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig
	cfg.BatchSize = 10
	q, pool := setup(t, cfg)
	ctx := context.Background()
	busy, quiet1, quiet2 := uuid.New(), uuid.New(), uuid.New()
	exec(t, pool, `INSERT INTO visitor_waiting_queue (id, project_id, visitor_id, source, urgency, priority)
		SELECT gen_random_uuid(), $1, gen_random_uuid(), 'visitor', 'urgent', 3 FROM generate_series(1, 500)`, busy)
	quiet := []queue.Entry{enqueue(t, q, quiet1, queue.UrgencyLow), enqueue(t, q, quiet2, queue.UrgencyLow),
		enqueue(t, q, quiet2, queue.UrgencyLow)}
	res, err := q.Scan(ctx)
	if err != nil || res.Attempted != 10 {
		t.Fatalf("scan attempted %d (%v), want 10", res.Attempted, err)
	}
	for _, e := range quiet {
		if got, _ := q.Entry(ctx, e.ID); got.RetryCount != 1 {
			t.Errorf("entry of a quiet project not attempted in the busy project's presence")
		}
	}
}
