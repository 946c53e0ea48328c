package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

var reservingConfig = queue.Config{MaxRetries: 3, RetryDelay: time.Hour, BatchSize: 50, MaxWorkers: 5,
	ReservationTimeout: time.Hour, StuckAfter: 10 * time.Minute}

// overdue makes the entry's reservation overdue (instead of waiting for it).
func overdue(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) {
	t.Helper()
	exec(t, pool, `UPDATE visitor_waiting_queue
		SET reserved_until = now() - interval '1 second' WHERE id = $1 AND reserved_until IS NOT NULL`, id)
}

// overdueReservation makes a project with one online agent and one entry
// whose reservation for that agent is overdue; it returns the entry.
func overdueReservation(t *testing.T, q *queue.Queue, pool *pgxpool.Pool) queue.Entry {
	t.Helper()
	project, _ := staffedProject(t, q, 1)
	e := enqueue(t, q, project, queue.UrgencyNormal)
	if got, err := q.Match(context.Background(), project); err != nil || len(got) != 1 {
		t.Fatalf("reservation not made: %+v %v", got, err)
	}
	overdue(t, pool, e.ID)
	return e
}

// checkLoads fails unless every agent's load equals its open assignments.
func checkLoads(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var bad int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM staff s WHERE current_load > max_concurrent
		OR current_load <> (SELECT count(*) FROM visitor_waiting_queue w
		                    WHERE w.assigned_staff_id = s.id AND w.status = 'assigned' AND w.released_at IS NULL)`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d agents whose load is over capacity or differs from their open assignments", bad)
	}
}

func countOutbox(t *testing.T, pool *pgxpool.Pool, key string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE routing_key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestUnconfirmedReservationExpiresAndGivesCapacityBack(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, reservingConfig)
	ctx := context.Background()
	project, staff := staffedProject(t, q, 1)
	a := enqueue(t, q, project, queue.UrgencyNormal)
	b := enqueue(t, q, project, queue.UrgencyNormal)
	got, err := q.Match(ctx, project)
	if err != nil || len(got) != 1 || got[0].ID != a.ID || got[0].ReservedUntil == nil || got[0].ConfirmedAt != nil {
		t.Fatalf("match: %+v %v, want a reservation of %s", got, err, a.ID)
	}
	// Not overdue yet: the sweep leaves it.
	if exp, err := q.SweepReservations(ctx, 10); err != nil || len(exp) != 0 {
		t.Fatalf("early sweep: %v %v", exp, err)
	}
	overdue(t, pool, a.ID)
	exp, err := q.SweepReservations(ctx, 10)
	if err != nil || len(exp) != 1 || exp[0].ID != a.ID || exp[0].Status != queue.StatusWaiting || exp[0].AssignedStaffID != nil {
		t.Fatalf("sweep: %+v %v", exp, err)
	}
	if e, _ := q.Entry(ctx, a.ID); e.Position != 1 {
		t.Fatalf("entry back in the queue at %d, want its place (1)", e.Position)
	}
	if st, _ := q.Staff(ctx, staff); st.CurrentLoad != 0 || st.FreeCapacity != 1 {
		t.Fatalf("agent after the expiry: %+v", st)
	}
	checkLoads(t, pool)
	if n := countOutbox(t, pool, queue.EventReservationExpired); n != 1 {
		t.Fatalf("%d reservation_expired events, want 1", n)
	}
	if exp, _ := q.SweepReservations(ctx, 10); len(exp) != 0 {
		t.Fatalf("second sweep expired %d again", len(exp))
	}

	// Assigned again, then confirmed: a confirmed assignment never expires.
	if got, _ := q.Match(ctx, project); len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("rematch: %+v", got)
	}
	for i := 0; i < 2; i++ {
		e, err := q.Confirm(ctx, a.ID)
		if err != nil || e.ConfirmedAt == nil || e.ReservedUntil != nil {
			t.Fatalf("confirm #%d: %+v %v", i+1, e, err)
		}
	}
	exec(t, pool, `UPDATE visitor_waiting_queue SET reserved_until = now() - interval '1 hour' WHERE id = $1`, a.ID)
	if exp, _ := q.SweepReservations(ctx, 10); len(exp) != 0 {
		t.Fatalf("a confirmed assignment expired")
	}
	if _, err := q.Confirm(ctx, b.ID); !errors.Is(err, queue.ErrNotAssigned) {
		t.Fatalf("confirm of a waiting entry: %v, want ErrNotAssigned", err)
	}

	// A visitor who queued again while reserved: the old entry expires
	// instead of waiting twice.
	if _, _, err := q.ReleaseAssignment(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.Match(ctx, project); len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("match of b: %+v", got)
	}
	again, err := q.Enqueue(ctx, queue.EnqueueRequest{ProjectID: project, VisitorID: b.VisitorID, Source: queue.SourceVisitor, Urgency: queue.UrgencyNormal})
	if err != nil {
		t.Fatal(err)
	}
	overdue(t, pool, b.ID)
	exp, err = q.SweepReservations(ctx, 10)
	if err != nil || len(exp) != 1 || exp[0].Status != queue.StatusExpired {
		t.Fatalf("sweep of a re-queued visitor's reservation: %+v %v", exp, err)
	}
	if e, _ := q.Entry(ctx, again.ID); e.Status != queue.StatusWaiting || e.Position != 1 {
		t.Fatalf("the visitor's new entry: %+v", e)
	}
	checkLoads(t, pool)
}

func TestReleaseOfAnAssignmentIsIdempotent(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	project, staff := staffedProject(t, q, 2)
	a := enqueue(t, q, project, queue.UrgencyNormal)
	b := enqueue(t, q, project, queue.UrgencyNormal)
	waiting := enqueue(t, q, project, queue.UrgencyNormal)
	if got, err := q.Match(ctx, project); err != nil || len(got) != 2 {
		t.Fatalf("match: %v %v", got, err)
	}
	// 20 concurrent releases of a: one releases, the others change nothing.
	var released atomic.Int32
	concurrently(20, func() {
		e, did, err := q.ReleaseAssignment(ctx, a.ID)
		if err != nil || e.ReleasedAt == nil {
			t.Errorf("release: %+v %v", e, err)
			return
		}
		if did {
			released.Add(1)
		}
	})
	if st, _ := q.Staff(ctx, staff); released.Load() != 1 || st.CurrentLoad != 1 {
		t.Fatalf("20 releases of one assignment: %d released, load %d; want 1 and 1", released.Load(), st.CurrentLoad)
	}
	checkLoads(t, pool)
	// The agent-level release ends b (the oldest open one); then nothing
	// is left to release, and a is still released once.
	if st, err := q.Release(ctx, staff); err != nil || st.CurrentLoad != 0 {
		t.Fatalf("agent release: %+v %v", st, err)
	}
	if e, _ := q.Entry(ctx, b.ID); e.ReleasedAt == nil {
		t.Fatalf("the agent release did not end b")
	}
	if _, err := q.Release(ctx, staff); !errors.Is(err, queue.ErrNothingToRelease) {
		t.Fatalf("agent release with nothing open: %v", err)
	}
	if _, did, err := q.ReleaseAssignment(ctx, b.ID); err != nil || did {
		t.Fatalf("release of b after the agent release: %v %v, want a no-op", did, err)
	}
	if _, _, err := q.ReleaseAssignment(ctx, waiting.ID); !errors.Is(err, queue.ErrNotAssigned) {
		t.Fatalf("release of a waiting entry: %v, want ErrNotAssigned", err)
	}
	if _, _, err := q.ReleaseAssignment(ctx, uuid.New()); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("release of an unknown entry: %v, want ErrNotFound", err)
	}
	checkLoads(t, pool)
}

// TestRecoverFinishesWhatACrashedReplicaLeft: the rows a replica that
// crashed between two commits leaves behind, recovered by four replicas
// starting at once: every repair happens once.
func TestRecoverFinishesWhatACrashedReplicaLeft(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, reservingConfig)
	ctx := context.Background()
	// 1. A release committed, its matching never ran: a free agent and a
	// waiting entry.
	p1, s1 := uuid.New(), uuid.New()
	putStaff(t, q, s1, p1, queue.Online, 1)
	w := enqueue(t, q, p1, queue.UrgencyNormal)
	// 2. A reservation handed out and never confirmed, now overdue.
	r := overdueReservation(t, q, pool)
	// 3. Counters that differ from the rows they count.
	s3 := uuid.New()
	putStaff(t, q, s3, uuid.New(), queue.Online, 3)
	aq := agentqueue.New(pool, 10)
	agent := uuid.New()
	for i := 0; i < 3; i++ {
		if _, err := aq.Enqueue(ctx, agent, uuid.New(), uuid.New(), "user-1"); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, pool, `UPDATE staff SET current_load = 2 WHERE id = $1`, s3)
	exec(t, pool, `UPDATE agent_queues SET queue_size = 7 WHERE agent_id = $1`, agent)

	var mu sync.Mutex
	var total queue.Recovery
	sizes := 0
	concurrently(4, func() {
		rec, err := q.Recover(ctx)
		n, err2 := aq.RepairSizes(ctx)
		if err != nil || err2 != nil {
			t.Errorf("recover: %v %v", err, err2)
		}
		mu.Lock()
		defer mu.Unlock()
		total.ReservationsExpired = append(total.ReservationsExpired, rec.ReservationsExpired...)
		total.Assigned = append(total.Assigned, rec.Assigned...)
		total.LoadsRepaired += rec.LoadsRepaired
		sizes += n
	})
	if len(total.ReservationsExpired) != 1 || total.ReservationsExpired[0].ID != r.ID {
		t.Fatalf("reservations expired: %+v, want %s once", total.ReservationsExpired, r.ID)
	}
	if total.LoadsRepaired != 1 || sizes != 1 {
		t.Fatalf("loads repaired %d, queue sizes repaired %d; want 1 and 1", total.LoadsRepaired, sizes)
	}
	// The waiting entry and the expired reservation's entry are assigned
	// (again), once each.
	seen := map[uuid.UUID]int{}
	for _, e := range total.Assigned {
		seen[e.ID]++
	}
	if len(total.Assigned) != 2 || seen[w.ID] != 1 || seen[r.ID] != 1 {
		t.Fatalf("assignments by recovery: %v, want %s and %s once each", seen, w.ID, r.ID)
	}
	checkLoads(t, pool)
	if st, _ := aq.Status(ctx, agent, 1000); st.QueuedCount != 3 {
		t.Fatalf("agent queue after recovery: %+v", st)
	}
	var size int
	if err := pool.QueryRow(ctx, `SELECT queue_size FROM agent_queues WHERE agent_id = $1`, agent).Scan(&size); err != nil || size != 3 {
		t.Fatalf("queue_size after recovery: %d %v, want 3", size, err)
	}
	if n := countOutbox(t, pool, queue.EventReservationExpired); n != 1 {
		t.Fatalf("%d reservation_expired events, want 1", n)
	}
}

func TestStuckEntries(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, reservingConfig)
	ctx := context.Background()
	stuck := func() int {
		t.Helper()
		n, err := q.StuckEntries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	project, staff := uuid.New(), uuid.New()
	w := enqueue(t, q, project, queue.UrgencyNormal)
	if n := stuck(); n != 0 {
		t.Fatalf("a fresh entry counts as stuck: %d", n)
	}
	// Not attempted for longer than the retry delay (1 h) + 10 min.
	exec(t, pool, `UPDATE visitor_waiting_queue SET entered_at = now() - interval '71 minutes' WHERE id = $1`, w.ID)
	if n := stuck(); n != 1 {
		t.Fatalf("stuck = %d, want 1 (the unattempted entry)", n)
	}
	// An attempt moves it on.
	if _, err := q.Process(ctx, w.ID, false); err != nil {
		t.Fatal(err)
	}
	if n := stuck(); n != 0 {
		t.Fatalf("stuck after an attempt = %d, want 0", n)
	}
	// A reservation overdue by more than 10 min that no sweep expired.
	putStaff(t, q, staff, project, queue.Online, 1)
	if got, _ := q.Match(ctx, project); len(got) != 1 {
		t.Fatal("no reservation")
	}
	exec(t, pool, `UPDATE visitor_waiting_queue SET reserved_until = now() - interval '11 minutes' WHERE id = $1`, w.ID)
	if n := stuck(); n != 1 {
		t.Fatalf("stuck = %d, want 1 (the overdue reservation)", n)
	}
	if _, err := q.SweepReservations(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// Back in the queue: its last attempt was the assignment, just now.
	if n := stuck(); n != 0 {
		t.Fatalf("stuck after the sweep = %d, want 0", n)
	}
}

func TestScanExpiresOverdueReservations(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, reservingConfig)
	ctx := context.Background()
	e := overdueReservation(t, q, pool)
	res, err := q.Scan(ctx)
	if err != nil || len(res.ReservationsExpired) != 1 || len(res.Assigned) != 1 || res.Assigned[0].ID != e.ID {
		t.Fatalf("scan: %+v %v, want the reservation expired and the entry assigned anew", res, err)
	}
	if got, _ := q.Entry(ctx, e.ID); got.ReservedUntil == nil || !got.ReservedUntil.After(time.Now()) {
		t.Fatalf("the new reservation: %+v", got)
	}
	checkLoads(t, pool)
}
