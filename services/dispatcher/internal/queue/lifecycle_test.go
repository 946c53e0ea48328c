package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
)

// TestReleasedEntryReadsReleased: a released entry says so, keeps who
// served it, cannot be confirmed or cancelled, and releasing it again
// changes nothing — by either release path.
func TestReleasedEntryReadsReleased(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, reservingConfig)
	ctx := context.Background()
	project, staff := staffedProject(t, q, 2)
	a := enqueue(t, q, project, queue.UrgencyNormal)
	b := enqueue(t, q, project, queue.UrgencyNormal)
	if got, err := q.Match(ctx, project); err != nil || len(got) != 2 {
		t.Fatalf("match: %+v %v", got, err)
	}
	e, did, err := q.ReleaseAssignment(ctx, a.ID)
	if err != nil || !did || e.Status != queue.StatusReleased || e.ReleasedAt == nil ||
		e.AssignedStaffID == nil || *e.AssignedStaffID != staff || e.Position != 0 {
		t.Fatalf("release: %+v %v %v", e, did, err)
	}
	if _, did, err := q.ReleaseAssignment(ctx, a.ID); err != nil || did {
		t.Fatalf("second release: %v %v, want a quiet no-op", did, err)
	}
	_, err = q.Confirm(ctx, a.ID)
	if !errors.Is(err, queue.ErrNotAssigned) || !strings.Contains(err.Error(), "released at") ||
		strings.Contains(err.Error(), "(assigned)") {
		t.Fatalf("confirm of a released entry: %v, want ErrNotAssigned saying it was released", err)
	}
	if _, err := q.Cancel(ctx, a.ID); !errors.Is(err, queue.ErrNotWaiting) {
		t.Fatalf("cancel of a released entry: %v", err)
	}
	// The release that names no entry releases b the same way.
	if _, err := q.Release(ctx, staff); err != nil {
		t.Fatal(err)
	}
	if e, _ := q.Entry(ctx, b.ID); e.Status != queue.StatusReleased || e.ReleasedAt == nil {
		t.Fatalf("b after the agent's release: %+v", e)
	}
	checkLoads(t, pool)
}

// TestAgentMoveIsRefusedWhileItHoldsWork: an agent with an open
// conversation stays in its project (ErrAgentBusy) until it is released;
// changes within its project go through.
func TestAgentMoveIsRefusedWhileItHoldsWork(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	project, staff := staffedProject(t, q, 1)
	a := enqueue(t, q, project, queue.UrgencyNormal)
	if got, _ := q.Match(ctx, project); len(got) != 1 {
		t.Fatalf("no assignment")
	}
	other := uuid.New()
	_, err := q.PutStaff(ctx, queue.StaffUpdate{ID: staff, ProjectID: other, Availability: queue.Online, MaxConcurrent: 1})
	if !errors.Is(err, queue.ErrAgentBusy) || !strings.Contains(err.Error(), "1 open conversation") {
		t.Fatalf("move of a busy agent: %v, want ErrAgentBusy", err)
	}
	if st, _ := q.Staff(ctx, staff); st.ProjectID != project || st.CurrentLoad != 1 {
		t.Fatalf("agent after the refused move: %+v", st)
	}
	if st, err := q.PutStaff(ctx, queue.StaffUpdate{ID: staff, ProjectID: project, Availability: queue.Away, MaxConcurrent: 3}); err != nil ||
		st.MaxConcurrent != 3 || st.Availability != queue.Away {
		t.Fatalf("change within the project: %+v %v", st, err)
	}
	if _, _, err := q.ReleaseAssignment(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := q.PutStaff(ctx, queue.StaffUpdate{ID: staff, ProjectID: other, Availability: queue.Online, MaxConcurrent: 1}); err != nil ||
		st.ProjectID != other || st.CurrentLoad != 0 {
		t.Fatalf("move of an idle agent: %+v %v", st, err)
	}
	checkLoads(t, pool)
}

// TestAgentMoveRacingAnAssignment: a move and a match at once end either
// way, never with the agent in one project holding an entry of another.
func TestAgentMoveRacingAnAssignment(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	moved, stayed := 0, 0
	for range 20 {
		project, staff := staffedProject(t, q, 1)
		enqueue(t, q, project, queue.UrgencyNormal)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = q.Match(ctx, project) })
		wg.Go(func() {
			_, _ = q.PutStaff(ctx, queue.StaffUpdate{ID: staff, ProjectID: uuid.New(), Availability: queue.Online, MaxConcurrent: 1})
		})
		wg.Wait()
		st, err := q.Staff(ctx, staff)
		if err != nil {
			t.Fatal(err)
		}
		if st.ProjectID == project {
			stayed++
		} else {
			moved++
		}
	}
	var strays int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM visitor_waiting_queue w JOIN staff s ON s.id = w.assigned_staff_id
		WHERE w.status = 'assigned' AND s.project_id <> w.project_id`).Scan(&strays); err != nil {
		t.Fatal(err)
	}
	if strays != 0 {
		t.Fatalf("%d assignments held by an agent of another project (%d moved, %d stayed)", strays, moved, stayed)
	}
	checkLoads(t, pool)
}

// TestUnconfirmedReservationsCountAsAttempts: an agent who never confirms
// gets the entry back each time its reservation expires, until the
// QUEUE_PROCESS_MAX_RETRIES-th expiry expires the entry (with
// event.waiting.expired), instead of handing it out for ever.
func TestUnconfirmedReservationsCountAsAttempts(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, reservingConfig)
	ctx := context.Background()
	project, staff := staffedProject(t, q, 1)
	e := enqueue(t, q, project, queue.UrgencyNormal)
	if got, err := q.Match(ctx, project); err != nil || len(got) != 1 {
		t.Fatalf("first reservation: %+v %v", got, err)
	}
	for attempt := 1; attempt <= reservingConfig.MaxRetries; attempt++ {
		overdue(t, pool, e.ID)
		res, err := q.Scan(ctx) // expires the reservation, then matches again
		if err != nil {
			t.Fatal(err)
		}
		got, _ := q.Entry(ctx, e.ID)
		last := attempt == reservingConfig.MaxRetries
		want := queue.StatusAssigned // the same scan handed it out again
		if last {
			want = queue.StatusExpired
		}
		if got.RetryCount != attempt || got.LastAttemptAt == nil || got.Status != want || last != (len(res.Expired) == 1) {
			t.Fatalf("after the expiry of reservation %d: %s, retry_count %d, scan expired %d; want %s, %d",
				attempt, got.Status, got.RetryCount, len(res.Expired), want, attempt)
		}
	}
	if n := countOutbox(t, pool, queue.EventExpired); n != 1 {
		t.Fatalf("%d expired events, want 1", n)
	}
	if n := countOutbox(t, pool, queue.EventReservationExpired); n != reservingConfig.MaxRetries {
		t.Fatalf("%d reservation_expired events, want %d", n, reservingConfig.MaxRetries)
	}
	if st, _ := q.Staff(ctx, staff); st.CurrentLoad != 0 {
		t.Fatalf("agent load %d after the entry expired", st.CurrentLoad)
	}
	checkLoads(t, pool)
}

// TestFractionalReservationTimeout: a reservation timeout with a fraction
// of a second reserves for that long (it was read as an integer, and 0.2 s
// confirmed assignments at once).
func TestFractionalReservationTimeout(t *testing.T) {
	t.Parallel()
	cfg := reservingConfig
	cfg.ReservationTimeout = 1500 * time.Millisecond
	q, _ := setup(t, cfg)
	project, _ := staffedProject(t, q, 1)
	enqueue(t, q, project, queue.UrgencyNormal)
	got, err := q.Match(context.Background(), project)
	if err != nil || len(got) != 1 || got[0].ReservedUntil == nil || got[0].ConfirmedAt != nil {
		t.Fatalf("match: %+v %v, want a reservation", got, err)
	}
	if d := got[0].ReservedUntil.Sub(*got[0].AssignedAt); d != cfg.ReservationTimeout {
		t.Fatalf("reserved for %s, want %s", d, cfg.ReservationTimeout)
	}
}
