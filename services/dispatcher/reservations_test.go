package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
)

// TestRecoveryOnStart: a database as a crashed replica left it; a
// dispatcher starting on it (its periodic scan off, so only the start-up
// recovery can act) has finished the work before it reports ready, and
// reports the entry nobody moves on as stuck.
func TestRecoveryOnStart(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	q := queue.New(db.Pool, queue.Config{MaxRetries: 3, RetryDelay: time.Hour, BatchSize: 50, MaxWorkers: 5,
		ReservationTimeout: time.Hour})
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	staff := func(id, project uuid.UUID, max int) {
		t.Helper()
		if _, err := q.PutStaff(ctx, queue.StaffUpdate{ID: id, ProjectID: project, Availability: queue.Online, MaxConcurrent: max}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(project uuid.UUID) queue.Entry {
		t.Helper()
		e, err := q.Enqueue(ctx, queue.EnqueueRequest{ProjectID: project, VisitorID: uuid.New(), Source: queue.SourceVisitor, Urgency: queue.UrgencyNormal})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// A release committed whose matching never ran.
	p1, s1 := uuid.New(), uuid.New()
	staff(s1, p1, 1)
	w := enqueue(p1)
	// A reservation that will never be confirmed, overdue.
	p2, s2 := uuid.New(), uuid.New()
	r := enqueue(p2)
	staff(s2, p2, 1)
	if a, err := q.Match(ctx, p2); err != nil || len(a) != 1 {
		t.Fatalf("reservation: %v %v", a, err)
	}
	exec(`UPDATE visitor_waiting_queue SET reserved_until = now() - interval '1 second' WHERE id = $1`, r.ID)
	// A load that differs from the agent's assignments.
	s3 := uuid.New()
	staff(s3, uuid.New(), 2)
	exec(`UPDATE staff SET current_load = 2 WHERE id = $1`, s3)
	// An entry nobody attempted for hours (no agent in its project).
	stuck := enqueue(uuid.New())
	exec(`UPDATE visitor_waiting_queue SET entered_at = now() - interval '3 hours' WHERE id = $1`, stuck.ID)

	d := startInProcess(t, testEnv(t, db.URL, testenv.AMQP(t), map[string]string{
		"QUEUE_PROCESS_ENABLED": "false", "QUEUE_RESERVATION_TIMEOUT_SECONDS": "3600", "QUEUE_STUCK_ENTRY_SECONDS": "60"}))

	var e entryJSON
	for _, c := range []struct {
		id    uuid.UUID
		staff uuid.UUID
	}{{w.ID, s1}, {r.ID, s2}} {
		if code := d.call(t, "GET", "/queue/entries/"+c.id.String(), nil, &e); code != 200 || e.Status != "assigned" || *e.AssignedStaffID != c.staff {
			t.Fatalf("entry %s after start: %d %+v, want assigned to %s", c.id, code, e, c.staff)
		}
	}
	var st staffJSON
	if d.call(t, "GET", "/staff/"+s3.String(), nil, &st); st.CurrentLoad != 0 {
		t.Fatalf("load of the agent without assignments after start: %d, want 0", st.CurrentLoad)
	}
	var expired int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE routing_key = $1`, queue.EventReservationExpired).Scan(&expired); err != nil || expired != 1 {
		t.Fatalf("reservation_expired events: %d %v, want 1", expired, err)
	}
	if _, body := get(t, d.ops+"/metrics"); !strings.Contains(body, "\n"+StuckEntriesMetric+" 1\n") {
		t.Fatalf("/metrics does not report the stuck entry as %s 1", StuckEntriesMetric)
	}
}

func TestReservationAPI(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	d := startInProcess(t, testEnv(t, db.URL, testenv.AMQP(t), map[string]string{"QUEUE_RESERVATION_TIMEOUT_SECONDS": "3600"}))
	project, staff := uuid.New(), uuid.New()
	if code := d.call(t, "PUT", "/staff/"+staff.String(), map[string]any{"project_id": project, "availability": "online", "max_concurrent": 1}, nil); code != 200 {
		t.Fatalf("put staff: %d", code)
	}
	var a, b entryJSON
	d.call(t, "POST", "/internal/ai/events", aiEvent(project, uuid.New(), "normal"), &a)
	d.call(t, "POST", "/internal/ai/events", aiEvent(project, uuid.New(), "normal"), &b)
	var e struct {
		entryJSON
		ReservedUntil *time.Time `json:"reserved_until"`
		ConfirmedAt   *time.Time `json:"confirmed_at"`
	}
	if d.call(t, "GET", "/queue/entries/"+a.EntryID.String(), nil, &e); e.Status != "assigned" || e.ReservedUntil == nil || e.ConfirmedAt != nil {
		t.Fatalf("assignment: %+v, want an unconfirmed reservation", e)
	}
	for i := 0; i < 2; i++ {
		if code := d.call(t, "POST", "/queue/entries/"+a.EntryID.String()+"/confirm", nil, &e); code != 200 || e.ConfirmedAt == nil || e.ReservedUntil != nil {
			t.Fatalf("confirm #%d: %d %+v", i+1, code, e)
		}
	}
	var errBody entryJSON
	if code := d.call(t, "POST", "/queue/entries/"+b.EntryID.String()+"/confirm", nil, &errBody); code != 409 || errBody.Code != "BUSINESS_NOT_ASSIGNED" {
		t.Fatalf("confirm of a waiting entry: %d %+v", code, errBody)
	}
	// Release twice: the first frees the unit (b is assigned at once), the
	// second changes nothing.
	for i, want := range []bool{true, false} {
		var rel struct {
			Released bool      `json:"released"`
			Entry    entryJSON `json:"entry"`
		}
		if code := d.call(t, "POST", "/queue/entries/"+a.EntryID.String()+"/release", nil, &rel); code != 200 || rel.Released != want {
			t.Fatalf("release #%d: %d %+v, want released=%v", i+1, code, rel, want)
		}
	}
	var st staffJSON
	d.call(t, "GET", "/staff/"+staff.String(), nil, &st)
	var got entryJSON
	d.call(t, "GET", "/queue/entries/"+b.EntryID.String(), nil, &got)
	if st.CurrentLoad != 1 || got.Status != "assigned" {
		t.Fatalf("after two releases of a: load %d, b %s; want 1 and assigned", st.CurrentLoad, got.Status)
	}
	if code := d.call(t, "POST", "/queue/entries/"+uuid.NewString()+"/release", nil, &errBody); code != 404 || errBody.Code != "NOT_FOUND" {
		t.Fatalf("release of an unknown entry: %d %+v", code, errBody)
	}
	checkReleasedAndBusy(t, d, a.EntryID, staff, project)
}

// checkReleasedAndBusy: the released entry says so, confirming it says why
// not, and its agent, which still holds a conversation, is not moved to
// another project.
func checkReleasedAndBusy(t *testing.T, d dispatcher, released, staff, project uuid.UUID) {
	t.Helper()
	var got, errBody entryJSON
	if d.call(t, "GET", "/queue/entries/"+released.String(), nil, &got); got.Status != "released" || got.Position != 0 {
		t.Fatalf("released entry: %+v", got)
	}
	if code := d.call(t, "POST", "/queue/entries/"+released.String()+"/confirm", nil, &errBody); code != 409 ||
		errBody.Code != "BUSINESS_NOT_ASSIGNED" || !strings.Contains(errBody.Error, "released at") || strings.Contains(errBody.Error, "(assigned)") {
		t.Fatalf("confirm of a released entry: %d %+v", code, errBody)
	}
	errBody = entryJSON{}
	if code := d.call(t, "PUT", "/staff/"+staff.String(), map[string]any{"project_id": uuid.New(), "availability": "online", "max_concurrent": 1}, &errBody); code != 409 ||
		errBody.Code != "BUSINESS_AGENT_BUSY" {
		t.Fatalf("move of a busy agent: %d %+v", code, errBody)
	}
	var st staffJSON
	if d.call(t, "GET", "/staff/"+staff.String(), nil, &st); st.ProjectID != project || st.CurrentLoad != 1 {
		t.Fatalf("agent after the refused move: %+v", st)
	}
}

// TestNeverConfirmedEntryExpires: an agent who never confirms gets the
// visitor back each time the reservation expires, and the entry expires
// once QUEUE_PROCESS_MAX_RETRIES reservations have, instead of going
// round for ever.
func TestNeverConfirmedEntryExpires(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	events := collectEvents(t, amqpURL)
	d := startInProcess(t, testEnv(t, db.URL, amqpURL, map[string]string{
		"QUEUE_RESERVATION_TIMEOUT_SECONDS": "0.2", "QUEUE_PROCESS_MAX_RETRIES": "3"}))
	project, staff := uuid.New(), uuid.New()
	d.call(t, "PUT", "/staff/"+staff.String(), map[string]any{"project_id": project, "availability": "online", "max_concurrent": 1}, nil)
	var e entryJSON
	if code := d.call(t, "POST", "/internal/ai/events", aiEvent(project, uuid.New(), "normal"), &e); code != 200 || e.Status != "assigned" {
		t.Fatalf("enqueue: %d %+v", code, e)
	}
	testenv.EventuallyWithin(t, 30*time.Second, "the entry to expire", func() bool {
		return d.call(t, "GET", "/queue/entries/"+e.EntryID.String(), nil, &e) == 200 && e.Status == "expired"
	})
	if e.RetryCount != 3 {
		t.Fatalf("expired after %d attempts, want 3", e.RetryCount)
	}
	testenv.EventuallyWithin(t, 20*time.Second, "the expired event and three reservation_expired", func() bool {
		n, _ := events.count("waiting.expired")
		r, _ := events.count("waiting.reservation_expired")
		return n == 1 && r == 3
	})
	var st staffJSON
	if d.call(t, "GET", "/staff/"+staff.String(), nil, &st); st.CurrentLoad != 0 {
		t.Fatalf("agent load %d after the entry expired", st.CurrentLoad)
	}
}
