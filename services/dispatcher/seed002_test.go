package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Seed 002 wired to matching and seed 000's transfer_to_human, driven
// end to end through the HTTP API and the broker.

// transferJSON is the TransferResult of a transfer_to_human.
type transferJSON struct {
	Success          bool       `json:"success"`
	Message          string     `json:"message"`
	EntryID          uuid.UUID  `json:"entry_id"`
	Status           string     `json:"status"`
	AssignedStaffID  *uuid.UUID `json:"assigned_staff_id"`
	RequestedStaffID *uuid.UUID `json:"requested_staff_id"`
	Source           string     `json:"source"`
	Reason           string     `json:"reason"`
	QueuePosition    *int       `json:"queue_position"`
	WaitingQueue     *entryJSON `json:"waiting_queue"`
	Code             string     `json:"code"`
}

// transfer sends a transfer_to_human for a new visitor of project, naming
// agent when it is not nil, and returns the status and the answer.
func transfer(t *testing.T, d dispatcher, project uuid.UUID, agent *uuid.UUID) (int, transferJSON) {
	t.Helper()
	payload := map[string]any{"reason": "asks for a person", "session_id": "channel_9@2"}
	if agent != nil {
		payload["staff_id"] = *agent
	}
	var out transferJSON
	code := d.call(t, "POST", "/internal/ai/events", map[string]any{"event_type": "transfer_to_human",
		"project_id": project, "visitor_id": uuid.New(), "payload": payload}, &out)
	return code, out
}

// assignedTo fails unless the answer says the visitor was assigned to agent.
func assignedTo(t *testing.T, what string, r transferJSON, agent uuid.UUID) {
	t.Helper()
	if !r.Success || r.Status != "assigned" || r.Message != "Assigned to staff" || r.AssignedStaffID == nil ||
		*r.AssignedStaffID != agent || r.QueuePosition != nil || r.WaitingQueue != nil {
		t.Fatalf("%s: %+v, want assigned to %s", what, r, agent)
	}
}

// checkCounters fails unless every agent's load equals its open
// assignments and every agent queue's size its queued items.
func checkCounters(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var bad int
	if err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM staff s WHERE current_load > max_concurrent OR current_load <>
			(SELECT count(*) FROM visitor_waiting_queue w WHERE w.assigned_staff_id = s.id AND w.status = 'assigned'))
		+ (SELECT count(*) FROM agent_queues a WHERE queue_size <>
			(SELECT count(*) FROM agent_queue_items i WHERE i.agent_id = a.agent_id AND i.status = 'queued'))
		+ (SELECT count(*) FROM visitor_waiting_queue e WHERE (e.status = 'queued') <>
			EXISTS (SELECT 1 FROM agent_queue_items i WHERE i.entry_id = e.id AND i.status = 'queued'))`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d rows whose counters or queue items disagree with the entries", bad)
	}
}

// waitAssignedEvent waits for event.waiting.assigned of the entry, naming
// the agent.
func (c *eventCollector) waitAssigned(t *testing.T, entry, agent uuid.UUID) {
	t.Helper()
	testenv.EventuallyWithin(t, 20*time.Second, "event.waiting.assigned of "+entry.String(), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range c.events {
			if e.Event == wire.EventWaitingAssigned && e.TaskID == entry && strings.Contains(string(e.Data), agent.String()) {
				return true
			}
		}
		return false
	})
}

// TestSeed002LoopThroughMatching: an agent of capacity 1 takes a visitor
// who asked for it at once; two more who ask for it while it is busy go
// to its per-agent queue (source no_staff, positions 1 and 2), and a
// second agent coming online takes the project's waiting visitor, not
// them; releasing the agent's conversation over HTTP pairs the first in
// the release's transaction, releasing over AMQP pairs the second; each
// pairing publishes event.waiting.assigned; the counters stay right.
func TestSeed002LoopThroughMatching(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	events := collectEvents(t, amqpURL)
	d := startInProcess(t, testEnv(t, db.URL, amqpURL, nil))
	project, agent, other := uuid.New(), uuid.New(), uuid.New()
	putAgent(t, d, agent, project, 1)
	_, first := transfer(t, d, project, &agent)
	assignedTo(t, "a transfer to a free agent", first, agent)
	var queued [2]transferJSON
	for i := range queued {
		if code, r := transfer(t, d, project, &agent); code != 200 || r.Status != "queued" || r.Source != "no_staff" ||
			!strings.HasPrefix(r.Reason, "No available staff: agent "+agent.String()+" is at capacity") ||
			r.QueuePosition == nil || *r.QueuePosition != i+1 || r.Message != "Added to the agent's queue" {
			t.Fatalf("transfer %d to the busy agent: %d %+v", i+1, code, r)
		} else {
			queued[i] = r
		}
	}
	var waiting entryJSON
	if code := d.call(t, "POST", "/internal/ai/events", aiEvent(project, uuid.New(), "urgent"), &waiting); code != 200 || waiting.Status != "waiting" {
		t.Fatalf("a visitor for any agent: %d %+v", code, waiting)
	}
	checkAgentQueue(t, d, agent, queued[0].EntryID, queued[1].EntryID)
	putAgent(t, d, other, project, 1)
	if e := entryOf(t, d, waiting.EntryID); e.Status != "assigned" || *e.AssignedStaffID != other {
		t.Fatalf("the project's visitor after a second agent came online: %+v", e)
	}
	var rel struct {
		Released bool      `json:"released"`
		Paired   entryJSON `json:"paired"`
	}
	if code := d.call(t, "POST", "/queue/entries/"+first.EntryID.String()+"/release", nil, &rel); code != 200 || !rel.Released ||
		rel.Paired.ID != queued[0].EntryID || rel.Paired.Status != "assigned" || *rel.Paired.AssignedStaffID != agent {
		t.Fatalf("release: %d %+v, want %s paired with the agent", code, rel, queued[0].EntryID)
	}
	events.waitAssigned(t, queued[0].EntryID, agent)
	checkAgentQueue(t, d, agent, queued[1].EntryID)
	publish(t, amqpURL, wire.StepWaitingCapacity, uuid.New(), map[string]any{"staff_id": agent, "action": "release"})
	events.waitAssigned(t, queued[1].EntryID, agent)
	if e := entryOf(t, d, queued[0].EntryID); e.Status != "released" {
		t.Fatalf("the released conversation: %+v", e)
	}
	checkAgentQueue(t, d, agent)
	checkCounters(t, db.Pool)
}

// putAgent puts an online agent of the given capacity in project.
func putAgent(t *testing.T, d dispatcher, agent, project uuid.UUID, max int) {
	t.Helper()
	if code := d.call(t, "PUT", "/staff/"+agent.String(), map[string]any{"project_id": project,
		"availability": "online", "max_concurrent": max}, nil); code != 200 {
		t.Fatalf("put agent: %d", code)
	}
}

// entryOf reads an entry.
func entryOf(t *testing.T, d dispatcher, id uuid.UUID) entryJSON {
	t.Helper()
	var e entryJSON
	if code := d.call(t, "GET", "/queue/entries/"+id.String(), nil, &e); code != 200 {
		t.Fatalf("entry %s: %d", id, code)
	}
	return e
}

// checkAgentQueue fails unless the agent's queue holds exactly the
// entries, in order, each at its position in its entry too.
func checkAgentQueue(t *testing.T, d dispatcher, agent uuid.UUID, entries ...uuid.UUID) {
	t.Helper()
	var st struct {
		QueuedCount int `json:"queuedCount"`
		Items       []struct {
			EntryID  *uuid.UUID `json:"entryId"`
			UserID   *string    `json:"userId"`
			Position int        `json:"position"`
		} `json:"items"`
	}
	if code := d.call(t, "GET", "/queue/agents/"+agent.String()+"/status", nil, &st); code != 200 || st.QueuedCount != len(entries) {
		t.Fatalf("agent queue: %d %+v, want %d items", code, st, len(entries))
	}
	for i, it := range st.Items {
		e := entryOf(t, d, entries[i])
		if it.EntryID == nil || *it.EntryID != entries[i] || it.Position != i+1 || e.Status != "queued" ||
			e.Position != i+1 || it.UserID == nil || *it.UserID != e.VisitorID.String() {
			t.Fatalf("agent queue item %d: %+v (entry %+v), want entry %s at %d", i, it, e, entries[i], i+1)
		}
	}
}

// TestTransferToHumanOverHTTP: transfer_to_human without staff answers the
// seed's TransferResult (no_staff, the reason, the position, the entry);
// a transfer naming an agent of another project is 404, one to a full
// agent queue 400 BUSINESS_QUEUE_FULL; a manual_service.request naming an
// agent is 400; the visitor queued for an agent cancels through the
// per-agent route, its entry with it.
func TestTransferToHumanOverHTTP(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	d := startInProcess(t, testEnv(t, db.URL, testenv.AMQP(t), map[string]string{"QUEUE_MAX_N": "1"}))
	project := uuid.New()
	code, r := transfer(t, d, project, nil)
	if code != 200 || !r.Success || r.Status != "waiting" || r.Source != "no_staff" || r.Message != "Added to waiting queue" ||
		r.Reason != "No available staff: no agent of the project is online" || r.QueuePosition == nil || *r.QueuePosition != 1 ||
		r.WaitingQueue == nil || r.WaitingQueue.ID != r.EntryID || r.WaitingQueue.ChannelID != "channel_9" {
		t.Fatalf("transfer without staff: %d %+v", code, r)
	}
	agent, stranger := uuid.New(), uuid.New()
	putAgent(t, d, agent, project, 0)
	putAgent(t, d, stranger, uuid.New(), 1)
	if code, r := transfer(t, d, project, &stranger); code != 404 || r.Code != "NOT_FOUND" {
		t.Fatalf("transfer to another project's agent: %d %+v", code, r)
	}
	_, queued := transfer(t, d, project, &agent)
	if code, r := transfer(t, d, project, &agent); code != 400 || r.Code != "BUSINESS_QUEUE_FULL" || queued.Status != "queued" {
		t.Fatalf("transfer to a full agent queue: %d %+v (first: %+v)", code, r, queued)
	}
	ev := aiEvent(project, uuid.New(), "normal")
	ev["payload"].(map[string]any)["staff_id"] = agent
	var e entryJSON
	if code := d.call(t, "POST", "/internal/ai/events", ev, &e); code != 400 || e.Code != "VALIDATION_ERROR" {
		t.Fatalf("manual_service.request naming an agent: %d %+v", code, e)
	}
	visitor := entryOf(t, d, queued.EntryID).VisitorID
	path := "/queue/agents/" + agent.String() + "/orders/" + queued.EntryID.String()
	if code := d.send(t, "DELETE", path, map[string]string{"x-user-id": "someone-else"}, nil, &e); code != 403 {
		t.Fatalf("cancel of a queued visitor by someone else: %d", code)
	}
	var c struct {
		Cancelled bool `json:"cancelled"`
	}
	if code := d.send(t, "DELETE", path, map[string]string{"x-user-id": visitor.String()}, nil, &c); code != 200 || !c.Cancelled {
		t.Fatalf("cancel by the visitor: %d %+v", code, c)
	}
	if got := entryOf(t, d, queued.EntryID); got.Status != "cancelled" {
		t.Fatalf("the entry after its item's cancel: %+v", got)
	}
	checkAgentQueue(t, d, agent)
	checkCounters(t, db.Pool)
}
