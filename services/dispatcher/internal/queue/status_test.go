package queue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
)

// TestStatusCountsWaitsAgentsAndOrder pins every field of a project's
// status.
func TestStatusCountsWaitsAgentsAndOrder(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	project := uuid.New()
	first := enqueue(t, q, project, queue.UrgencyNormal)
	urgent := enqueue(t, q, project, queue.UrgencyUrgent)
	enqueue(t, q, uuid.New(), queue.UrgencyHigh) // another project
	exec(t, pool, `UPDATE visitor_waiting_queue SET entered_at = now() - interval '90 seconds' WHERE id = $1`, first.ID)
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	putStaff(t, q, a, project, queue.Online, 3)
	putStaff(t, q, b, project, queue.Away, 2)
	putStaff(t, q, c, project, queue.Online, 1)
	exec(t, pool, `UPDATE staff SET current_load = 1 WHERE id IN ($1, $2)`, a, c)
	exec(t, pool, `UPDATE visitor_waiting_queue SET visitor_message = repeat('字', 300), extra_metadata = '{"k": "v"}' WHERE id = $1`, urgent.ID)
	st, err := q.Status(ctx, project, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.ProjectID != project || st.Waiting != 2 || st.WaitingByPriority["1"] != 1 || st.WaitingByPriority["3"] != 1 ||
		len(st.WaitingByPriority) != 2 {
		t.Fatalf("waiting %d by priority %v", st.Waiting, st.WaitingByPriority)
	}
	if st.OldestEnteredAt == nil || st.LongestWaitSeconds < 89 || st.LongestWaitSeconds > 150 {
		t.Fatalf("oldest %v, longest wait %.1f s, want about 90 s", st.OldestEnteredAt, st.LongestWaitSeconds)
	}
	// The counts are totals; the limit bounds the lists.
	if st.AvailableAgents != 1 || st.FreeCapacity != 2 || st.AgentCount != 3 || len(st.Agents) != 1 {
		t.Fatalf("available %d, free %d, agents %d listed %d; want 1, 2, 3, 1", st.AvailableAgents, st.FreeCapacity, st.AgentCount, len(st.Agents))
	}
	if len(st.Entries) != 1 || st.Entries[0].ID != urgent.ID || st.Entries[0].Position != 1 {
		t.Fatalf("entries %+v, want the urgent entry at 1 (limit 1)", st.Entries)
	}
	// A listed entry is a summary: its message cut, no metadata.
	if e := st.Entries[0]; e.VisitorMessage != strings.Repeat("字", queue.ListedMessageChars) || !e.VisitorMessageTruncated || e.ExtraMetadata != nil {
		t.Fatalf("listed entry: message of %d characters (truncated %v), metadata %s", len([]rune(e.VisitorMessage)), e.VisitorMessageTruncated, e.ExtraMetadata)
	}
	if e, _ := q.Entry(ctx, urgent.ID); len([]rune(e.VisitorMessage)) != 300 || e.VisitorMessageTruncated || string(e.ExtraMetadata) != `{"k": "v"}` {
		t.Fatalf("the entry itself: message of %d characters, metadata %s", len([]rune(e.VisitorMessage)), e.ExtraMetadata)
	}
	empty, err := q.Status(ctx, uuid.New(), 10)
	if err != nil || empty.Waiting != 0 || empty.OldestEnteredAt != nil || empty.LongestWaitSeconds != 0 ||
		empty.Entries == nil || empty.Agents == nil || empty.WaitingByPriority == nil {
		t.Fatalf("status of an unknown project: %+v %v", empty, err)
	}
}

func TestProjectsListsEveryQueueLongestWaitFirst(t *testing.T) {
	t.Parallel()
	q, pool := setup(t, defaultConfig)
	ctx := context.Background()
	busy, quiet, staffed := uuid.New(), uuid.New(), uuid.New()
	old := enqueue(t, q, busy, queue.UrgencyNormal)
	enqueue(t, q, busy, queue.UrgencyLow)
	enqueue(t, q, quiet, queue.UrgencyHigh)
	gone := enqueue(t, q, uuid.New(), queue.UrgencyNormal)
	if _, err := q.Cancel(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	exec(t, pool, `UPDATE visitor_waiting_queue SET entered_at = now() - interval '1 minute' WHERE id = $1`, old.ID)
	putStaff(t, q, uuid.New(), staffed, queue.Online, 2)
	putStaff(t, q, uuid.New(), busy, queue.Away, 1)

	ps, err := q.Projects(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].ProjectID != busy || ps[1].ProjectID != quiet || ps[2].ProjectID != staffed {
		t.Fatalf("projects %+v, want busy, quiet, staffed (a cancelled entry's project not listed)", ps)
	}
	if p := ps[0]; p.Waiting != 2 || p.LongestWaitSeconds < 59 || p.OldestEnteredAt == nil || p.Agents != 1 || p.AvailableAgents != 0 {
		t.Fatalf("busy project %+v", p)
	}
	if p := ps[2]; p.Waiting != 0 || p.OldestEnteredAt != nil || p.Agents != 1 || p.AvailableAgents != 1 || p.FreeCapacity != 2 {
		t.Fatalf("staffed project %+v", p)
	}
	if top, err := q.Projects(ctx, 1); err != nil || len(top) != 1 || top[0].ProjectID != busy {
		t.Fatalf("limit 1: %+v %v", top, err)
	}
}
