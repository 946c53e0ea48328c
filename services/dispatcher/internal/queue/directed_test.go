package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

var directedConfig = queue.Config{MaxRetries: 3, RetryDelay: defaultConfig.RetryDelay, BatchSize: 50, MaxWorkers: 5, AgentQueueMax: 3}

// transferTo runs a transfer for a new visitor of project, naming agent
// when it is not nil.
func transferTo(t *testing.T, q *queue.Queue, project uuid.UUID, agent *uuid.UUID) (queue.TransferResult, error) {
	t.Helper()
	return q.Transfer(context.Background(), queue.EnqueueRequest{ProjectID: project, VisitorID: uuid.New(),
		Source: queue.SourceAIRequest, Urgency: queue.UrgencyNormal, Reason: "asks for a person"}, agent)
}

// checkQueues fails unless loads equal open assignments, queue sizes
// equal queued items, and an entry is queued exactly when an item stands
// for it in a queue.
func checkQueues(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	checkLoads(t, pool)
	var bad int
	if err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM agent_queues a WHERE queue_size <>
			(SELECT count(*) FROM agent_queue_items i WHERE i.agent_id = a.agent_id AND i.status = 'queued'))
		+ (SELECT count(*) FROM visitor_waiting_queue e WHERE (e.status = 'queued') <>
			EXISTS (SELECT 1 FROM agent_queue_items i WHERE i.entry_id = e.id AND i.status = 'queued'))`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d agent queues or entries disagree with the queued items", bad)
	}
}

// TestTransferAssignsAtOnceOrEnqueuesNoStaff: seed 000's
// transfer_to_human — no agent online: waiting with source no_staff and
// the reason (attempt 1 counted); an agent free: assigned at once; the
// visitors already waiting are served before the transfer.
func TestTransferAssignsAtOnceOrEnqueuesNoStaff(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, directedConfig)
	project := uuid.New()
	r, err := transferTo(t, q, project, nil)
	if err != nil || !r.Success || r.Status != queue.StatusWaiting || r.Source != queue.SourceNoStaff ||
		r.Reason != "No available staff: no agent of the project is online" || r.Message != "Added to waiting queue" ||
		r.QueuePosition == nil || *r.QueuePosition != 1 || r.WaitingQueue == nil || r.WaitingQueue.RetryCount != 1 {
		t.Fatalf("transfer without staff: %+v %v", r, err)
	}
	// An agent comes online without a match running: the waiting visitor
	// is served first, and the next transfer finds the agent busy.
	agent := uuid.New()
	putStaff(t, q, agent, project, queue.Online, 1)
	r2, err := transferTo(t, q, project, nil)
	if err != nil || r2.Status != queue.StatusWaiting || r2.Reason != "No available staff: all 1 online agents of the project are busy" {
		t.Fatalf("transfer behind a waiting visitor: %+v %v", r2, err)
	}
	if e, _ := q.Entry(context.Background(), r.EntryID); e.Status != queue.StatusAssigned || *e.AssignedStaffID != agent {
		t.Fatalf("the visitor ahead: %+v", e)
	}
	other := uuid.New()
	putStaff(t, q, other, uuid.New(), queue.Online, 1)
	r3, err := transferTo(t, q, mustProject(t, q, other), nil)
	if err != nil || !r3.Success || r3.Status != queue.StatusAssigned || r3.Message != "Assigned to staff" ||
		*r3.AssignedStaffID != other || r3.Source != queue.SourceAIRequest || r3.Reason != "asks for a person" ||
		r3.QueuePosition != nil || r3.WaitingQueue != nil {
		t.Fatalf("transfer to a free agent: %+v %v", r3, err)
	}
	if n := countOutbox(t, pool, queue.EventAssigned); n != 2 {
		t.Fatalf("%d assigned events, want 2", n)
	}
	checkQueues(t, pool)
}

// mustProject is the project of an agent.
func mustProject(t *testing.T, q *queue.Queue, agent uuid.UUID) uuid.UUID {
	t.Helper()
	st, err := q.Staff(context.Background(), agent)
	if err != nil {
		t.Fatal(err)
	}
	return st.ProjectID
}

// TestTransferToAnAgent: seed 002's matchOrder — free: assigned to it;
// busy: queued in its queue (positions 1..n); full, unknown or of another
// project: refused with nothing left behind; away: the project's other
// agents are tried.
func TestTransferToAnAgent(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, directedConfig)
	project, agent := staffedProject(t, q, 1)
	if r, err := transferTo(t, q, project, &agent); err != nil || r.Status != queue.StatusAssigned || *r.AssignedStaffID != agent || *r.RequestedStaffID != agent {
		t.Fatalf("transfer to the free agent: %+v %v", r, err)
	}
	for i := 1; i <= directedConfig.AgentQueueMax; i++ {
		r, err := transferTo(t, q, project, &agent)
		if err != nil || r.Status != queue.StatusQueued || *r.QueuePosition != i || r.Source != queue.SourceNoStaff ||
			!strings.Contains(r.Reason, "is at capacity (1 of 1 conversations)") || r.WaitingQueue.RetryCount != 0 {
			t.Fatalf("transfer %d to the busy agent: %+v %v", i, r, err)
		}
	}
	before := countRows(t, pool)
	if _, err := transferTo(t, q, project, &agent); !errors.Is(err, agentqueue.ErrQueueFull) {
		t.Fatalf("transfer to a full queue: %v", err)
	}
	stranger := uuid.New()
	putStaff(t, q, stranger, uuid.New(), queue.Online, 5)
	for _, a := range []uuid.UUID{uuid.New(), stranger} {
		if _, err := transferTo(t, q, project, &a); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("transfer to an agent not of the project: %v", err)
		}
	}
	if after := countRows(t, pool); after != before {
		t.Fatalf("refused transfers left rows: %d before, %d after", before, after)
	}
	away, helper := uuid.New(), uuid.New()
	putStaff(t, q, away, project, queue.Away, 5)
	putStaff(t, q, helper, project, queue.Online, 1)
	if r, err := transferTo(t, q, project, &away); err != nil || r.Status != queue.StatusAssigned || *r.AssignedStaffID != helper || *r.RequestedStaffID != away {
		t.Fatalf("transfer to an away agent: %+v %v", r, err)
	}
	checkQueues(t, pool)
}

// countRows counts the rows a transfer writes.
func countRows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM visitor_waiting_queue)
		+ (SELECT count(*) FROM agent_queue_items) + (SELECT count(*) FROM outbox)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// queueFor fills the busy agent's queue with n transfers and returns
// their entries in order.
func queueFor(t *testing.T, q *queue.Queue, project, agent uuid.UUID, n int) []uuid.UUID {
	t.Helper()
	var out []uuid.UUID
	for range n {
		r, err := transferTo(t, q, project, &agent)
		if err != nil || r.Status != queue.StatusQueued {
			t.Fatalf("queue for the agent: %+v %v", r, err)
		}
		out = append(out, r.EntryID)
	}
	return out
}

// TestReleasePairsTheAgentsNextVisitor: a release hands the freed unit to
// the oldest visitor queued for the agent in its own transaction, before
// the project's waiting visitors (even urgent ones); more capacity does
// the same through Match; a visitor queued cannot queue again.
func TestReleasePairsTheAgentsNextVisitor(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, directedConfig)
	ctx := context.Background()
	project, agent := staffedProject(t, q, 1)
	first, err := transferTo(t, q, project, &agent)
	if err != nil || first.Status != queue.StatusAssigned {
		t.Fatalf("first transfer: %+v %v", first, err)
	}
	queued := queueFor(t, q, project, agent, 3)
	urgent := enqueue(t, q, project, queue.UrgencyUrgent)
	rel, err := q.ReleaseEntry(ctx, first.EntryID)
	if err != nil || !rel.Released || len(rel.Paired) != 1 || rel.Paired[0].ID != queued[0] || *rel.Paired[0].AssignedStaffID != agent {
		t.Fatalf("release: %+v %v, want %s paired", rel, err, queued[0])
	}
	if a, err := q.Match(ctx, project); err != nil || len(a) != 0 {
		t.Fatalf("match after the pairing: %+v %v, want nothing (the agent is busy again)", a, err)
	}
	if e, _ := q.Entry(ctx, queued[1]); e.Status != queue.StatusQueued || e.Position != 1 {
		t.Fatalf("the next queued visitor: %+v", e)
	}
	putStaff(t, q, agent, project, queue.Online, 3)
	a, err := q.Match(ctx, project)
	if err != nil || len(a) != 2 || a[0].ID != queued[1] || a[1].ID != queued[2] {
		t.Fatalf("match after raising capacity: %+v %v, want the agent's queue first", a, err)
	}
	if e, _ := q.Entry(ctx, urgent.ID); e.Status != queue.StatusWaiting {
		t.Fatalf("the project's urgent visitor took a unit the agent's queue was owed: %+v", e)
	}
	if _, err := q.Transfer(ctx, queue.EnqueueRequest{ProjectID: project, VisitorID: urgent.VisitorID,
		Source: queue.SourceAIRequest, Urgency: queue.UrgencyNormal}, &agent); !isDuplicate(err) {
		t.Fatalf("a waiting visitor's transfer: %v, want a duplicate", err)
	}
	if n := countOutbox(t, pool, queue.EventAssigned); n != 4 {
		t.Fatalf("%d assigned events, want 4", n)
	}
	checkQueues(t, pool)
}

func isDuplicate(err error) bool {
	var dup *queue.DuplicateError
	return errors.As(err, &dup)
}

// TestQueuedVisitorsCancelledOrHandedBack: cancelling a queued entry takes
// its item out of the agent's queue; an agent going offline hands the rest
// back to the project's queue at their arrival place, where another agent
// serves them.
func TestQueuedVisitorsCancelledOrHandedBack(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, directedConfig)
	ctx := context.Background()
	project, agent := staffedProject(t, q, 1)
	if _, err := transferTo(t, q, project, &agent); err != nil {
		t.Fatal(err)
	}
	queued := queueFor(t, q, project, agent, 3)
	if e, err := q.Cancel(ctx, queued[0]); err != nil || e.Status != queue.StatusCancelled {
		t.Fatalf("cancel a queued entry: %+v %v", e, err)
	}
	checkQueues(t, pool)
	st, err := q.PutStaff(ctx, queue.StaffUpdate{ID: agent, ProjectID: project, Availability: queue.Offline, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := q.Rematch(ctx, st); err != nil || len(a) != 0 {
		t.Fatalf("rematch with nobody free: %+v %v", a, err)
	}
	for i, id := range queued[1:] {
		if e, _ := q.Entry(ctx, id); e.Status != queue.StatusWaiting || e.Position != i+1 || *e.RequestedStaffID != agent {
			t.Fatalf("handed back entry %d: %+v", i, e)
		}
	}
	checkQueues(t, pool)
	helper := uuid.New()
	putStaff(t, q, helper, project, queue.Online, 2)
	if a, err := q.Match(ctx, project); err != nil || len(a) != 2 || a[0].ID != queued[1] {
		t.Fatalf("another agent serves them: %+v %v", a, err)
	}
	checkQueues(t, pool)
}

// TestPairingRacesReleasesAndCancels: releases, cancels of queued
// visitors and new transfers racing on one agent: every visitor ends
// assigned at most once (the consumed items are exactly the assigned
// entries), nobody is both cancelled and paired, no unit is left free
// while a visitor is queued for the agent (no lost wake-up: no scan or
// match runs), and the counters stay right.
func TestPairingRacesReleasesAndCancels(t *testing.T) {
	t.Parallel()
	cfg := directedConfig
	cfg.AgentQueueMax = 100
	q, pool := setup(t, cfg)
	ctx := context.Background()
	project, agent := staffedProject(t, q, 2)
	for range 2 {
		if r, err := transferTo(t, q, project, &agent); err != nil || r.Status != queue.StatusAssigned {
			t.Fatalf("transfer to the free agent: %+v %v", r, err)
		}
	}
	queued := queueFor(t, q, project, agent, 40)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(queued); i += 4 {
				race(t, q, w, project, agent, queued[i])
			}
		}()
	}
	wg.Wait()
	checkQueues(t, pool)
	var bad int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM agent_queue_items i JOIN visitor_waiting_queue e ON e.id = i.entry_id
		WHERE (i.status = 'consumed') <> (e.status IN ('assigned', 'released'))
		   OR (i.status = 'cancelled') <> (e.status = 'cancelled')`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("%d items whose status disagrees with their entry's (%v)", bad, err)
	}
	st, err := q.Staff(ctx, agent)
	var waiting int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM visitor_waiting_queue WHERE status = 'queued'`).Scan(&waiting)
	if err != nil || (st.FreeCapacity > 0 && waiting > 0) {
		t.Fatalf("agent %+v has a free unit while %d visitors are queued for it (%v)", st, waiting, err)
	}
}

// race is one step of racer w: releases (w 0 and 2), cancels of the
// queued entry (w 1), new transfers to the agent (w 3).
func race(t *testing.T, q *queue.Queue, w int, project, agent, entry uuid.UUID) {
	ctx := context.Background()
	switch w {
	case 0, 2:
		if _, _, err := q.ReleaseStaff(ctx, agent); err != nil && !errors.Is(err, queue.ErrNothingToRelease) {
			t.Errorf("release: %v", err)
		}
	case 1:
		if _, err := q.CancelBy(ctx, entry, "racer"); err != nil && !errors.Is(err, queue.ErrNotWaiting) {
			t.Errorf("cancel: %v", err)
		}
	default:
		if _, err := q.Transfer(ctx, queue.EnqueueRequest{ProjectID: project, VisitorID: uuid.New(),
			Source: queue.SourceAIRequest, Urgency: queue.UrgencyNormal}, &agent); err != nil {
			t.Errorf("transfer: %v", err)
		}
	}
}

// TestQueuedVisitorsCountInStatusAndStuck: the project's status counts
// the visitors queued for its agents (apart from its waiting entries); a
// visitor queued for StuckAfter while its agent has a free unit nobody
// paired counts as stuck until a match pairs it.
func TestQueuedVisitorsCountInStatusAndStuck(t *testing.T) {
	t.Parallel()
	cfg := directedConfig
	cfg.StuckAfter = time.Minute
	q, pool := setup(t, cfg)
	ctx := context.Background()
	project, agent := staffedProject(t, q, 1)
	if _, err := transferTo(t, q, project, &agent); err != nil {
		t.Fatal(err)
	}
	queued := queueFor(t, q, project, agent, 2)
	if st, err := q.Status(ctx, project, 100); err != nil || st.Queued != 2 || st.Waiting != 0 || len(st.Entries) != 0 {
		t.Fatalf("status: %+v %v, want 2 queued, none waiting", st, err)
	}
	// A unit freed behind the dispatcher's back, long after they queued.
	exec(t, pool, `UPDATE staff SET max_concurrent = 2 WHERE id = $1`, agent)
	exec(t, pool, `UPDATE visitor_waiting_queue SET updated_at = now() - interval '2 minutes' WHERE status = 'queued'`)
	if n, err := q.StuckEntries(ctx); err != nil || n != 2 {
		t.Fatalf("stuck = %d %v, want 2", n, err)
	}
	if a, err := q.Match(ctx, project); err != nil || len(a) != 1 || a[0].ID != queued[0] {
		t.Fatalf("match: %+v %v, want the first queued visitor paired", a, err)
	}
	if n, err := q.StuckEntries(ctx); err != nil || n != 0 {
		t.Fatalf("stuck after the pairing = %d %v, want 0 (the agent is busy again)", n, err)
	}
	checkQueues(t, pool)
}
