package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Seed 000's transfer_to_human(): a visitor asks for a human agent now.
// The seed assigns an available agent at once and, when there is none,
// enqueues the visitor with source no_staff and the reason "No available
// staff", answering a TransferResult. Here the request becomes an entry in
// one transaction: it serves the project's queue in order (visitors ahead
// first) and is assigned if an agent is left for it; otherwise it waits with
// source no_staff and a reason saying why, and counts as attempt 1 (as the
// trigger on enqueue does). A transfer naming an agent (seed 002's
// matchOrder) goes to that agent: assigned when it has a free unit, queued
// in its per-agent queue when it is at capacity; an agent that is not
// online cannot take it, so the project's agents are tried instead.

// NoStaffReason starts the reason of every entry a transfer enqueued (the
// seed's words), followed by what made it so.
const NoStaffReason = "No available staff"

// TransferResult is the seed's TransferResult: what a transfer did.
type TransferResult struct {
	// Success: the visitor was assigned or is waiting (false only when the
	// attempt was its last and it expired: QUEUE_PROCESS_MAX_RETRIES 1).
	Success bool `json:"success"`
	// Message: "Assigned to staff", "Added to waiting queue" (the seed's),
	// "Added to the agent's queue", or why it failed.
	Message string    `json:"message"`
	EntryID uuid.UUID `json:"entry_id"`
	Status  Status    `json:"status"`
	// AssignedStaffID is the agent that took the visitor, when assigned.
	AssignedStaffID *uuid.UUID `json:"assigned_staff_id"`
	// RequestedStaffID is the agent the transfer named, if any.
	RequestedStaffID *uuid.UUID `json:"requested_staff_id"`
	// Source is no_staff when the visitor was enqueued for want of staff.
	Source Source `json:"source"`
	// Reason is why the visitor waits ("No available staff: …"), or the
	// request's reason when it was assigned.
	Reason string `json:"reason"`
	// QueuePosition is the visitor's live position while it waits: in the
	// project's queue (waiting) or in the agent's queue (queued); nil
	// once assigned.
	QueuePosition *int `json:"queue_position"`
	// WaitingQueue is the entry while it waits (the seed's waiting_queue);
	// nil when assigned at once.
	WaitingQueue *Entry `json:"waiting_queue"`
}

// transferResult words what happened to the transfer's entry e.
func transferResult(e Entry) TransferResult {
	r := TransferResult{Success: true, EntryID: e.ID, Status: e.Status, AssignedStaffID: e.AssignedStaffID,
		RequestedStaffID: e.RequestedStaffID, Source: e.Source, Reason: e.Reason}
	switch e.Status {
	case StatusWaiting, StatusQueued:
		r.Message = "Added to waiting queue"
		if e.Status == StatusQueued {
			r.Message = "Added to the agent's queue"
		}
		pos, entry := e.Position, e
		r.QueuePosition, r.WaitingQueue = &pos, &entry
	case StatusExpired:
		r.Success = false
		r.Message = "No available staff, and the attempt was the last one (QUEUE_PROCESS_MAX_RETRIES): the request expired"
	default:
		r.Message = "Assigned to staff"
	}
	return r
}

// Transfer runs transfer_to_human() for r, naming agent when not nil
// (a transfer to that agent). A visitor already active in the project gets
// a *DuplicateError; an agent that is unknown or not of the project,
// ErrNotFound; an agent whose queue is full, agentqueue.ErrQueueFull.
// Nothing is left behind by a refused transfer.
func (q *Queue) Transfer(ctx context.Context, r EnqueueRequest, agent *uuid.UUID) (TransferResult, error) {
	if err := r.Validate(); err != nil {
		return TransferResult{}, err
	}
	if r.ID == uuid.Nil {
		r.ID = uuid.New()
	}
	var e Entry
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		if err := insertEntry(ctx, tx, r); err != nil {
			return err
		}
		var err error
		e, err = q.transferIn(ctx, tx, r, agent)
		return err
	})
	if err != nil {
		var dup *DuplicateError
		if derr := q.duplicate(ctx, r, err); errors.As(derr, &dup) {
			return TransferResult{}, derr
		}
		return TransferResult{}, fmt.Errorf("transfer visitor %s: %w", r.VisitorID, err)
	}
	// What concurrent matchers held during the transaction: a waiting
	// visitor may be matched, a queued one paired now.
	switch e.Status {
	case StatusWaiting:
		_, err = q.Match(ctx, e.ProjectID)
	case StatusQueued:
		_, err = q.PairAgent(ctx, *e.RequestedStaffID)
	}
	if err == nil && (e.Status == StatusWaiting || e.Status == StatusQueued) {
		e, err = q.Entry(ctx, e.ID)
	}
	return transferResult(e), err
}

// transferIn is the transfer's work on its new entry inside tx: to the
// named agent first, then to the project's queue.
func (q *Queue) transferIn(ctx context.Context, tx pgx.Tx, r EnqueueRequest, agent *uuid.UUID) (Entry, error) {
	var why []string
	if agent != nil {
		e, done, note, err := q.transferToAgent(ctx, tx, r, *agent)
		if err != nil || done {
			return e, err
		}
		why = append(why, note)
	}
	out, err := q.processIn(ctx, tx, r.ID, false)
	if err != nil {
		return Entry{}, err
	}
	if out.Entry.Status != StatusWaiting && out.Entry.Status != StatusExpired {
		return out.Entry, nil
	}
	note, err := projectStaffNote(ctx, tx, r.ProjectID)
	if err != nil {
		return Entry{}, err
	}
	reason := limitRunes(NoStaffReason+": "+strings.Join(append(why, note), "; "), MaxReason)
	if _, err := tx.Exec(ctx, `UPDATE visitor_waiting_queue SET source = 'no_staff', reason = $2, updated_at = now()
		WHERE id = $1`, r.ID, reason); err != nil {
		return Entry{}, err
	}
	return entry(ctx, tx, r.ID)
}

// assignToSQL assigns entry $1 to agent $3 (the reservation timeout $2 as
// assignSet takes it), reserving one unit of its capacity with a
// conditional update.
var assignToSQL = `WITH reserved AS (
	UPDATE staff s
	SET current_load = s.current_load + 1, idle_since = now(), updated_at = now()
	WHERE s.id = $3 AND s.availability = 'online' AND s.current_load < s.max_concurrent
	RETURNING s.id
)
UPDATE visitor_waiting_queue e
SET ` + assignSet + `
FROM reserved
WHERE e.id = $1 AND e.status = 'waiting'
RETURNING ` + entryColumnsQualified

// transferToAgent sends the transfer's entry to the agent it names, whose
// row it locks: assigned when the agent is online with a free unit and
// nobody queued for it, queued in its per-agent queue when it is online
// without (done is true either way). An agent that is not online cannot
// take it: done is false and note says so.
func (q *Queue) transferToAgent(ctx context.Context, tx pgx.Tx, r EnqueueRequest, agent uuid.UUID) (e Entry, done bool, note string, err error) {
	st, err := scanStaff(tx.QueryRow(ctx, `SELECT `+staffColumns+` FROM staff WHERE id = $1 FOR UPDATE`, agent))
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && st.ProjectID != r.ProjectID) {
		return Entry{}, false, "", fmt.Errorf("staff_id %s: no such agent in project %s: %w", agent, r.ProjectID, ErrNotFound)
	}
	if err != nil {
		return Entry{}, false, "", err
	}
	if _, err := tx.Exec(ctx, `UPDATE visitor_waiting_queue SET requested_staff_id = $2 WHERE id = $1`, r.ID, agent); err != nil {
		return Entry{}, false, "", err
	}
	if st.Availability != Online {
		return Entry{}, false, fmt.Sprintf("agent %s is %s", agent, st.Availability), nil
	}
	var ahead bool
	if err := tx.QueryRow(ctx, `SELECT `+fmt.Sprintf(servesOwnQueue, "$1::uuid"), agent).Scan(&ahead); err != nil {
		return Entry{}, false, "", err
	}
	if st.FreeCapacity > 0 && !ahead {
		e, err := scanEntry(tx.QueryRow(ctx, assignToSQL, r.ID, q.config().ReservationTimeout.Seconds(), agent), false)
		if err != nil {
			return Entry{}, false, "", fmt.Errorf("assign to agent %s: %w", agent, err)
		}
		return e, true, "", addEvent(ctx, tx, EventAssigned, e)
	}
	if _, err := agentqueue.EnqueueIn(ctx, tx, q.config().AgentQueueMax, agentqueue.NewOrder{Agent: agent,
		Order: r.ID, Task: r.ID, User: r.VisitorID.String(), Entry: &r.ID}); err != nil {
		return Entry{}, false, "", err
	}
	reason := fmt.Sprintf("%s: agent %s is at capacity (%d of %d conversations); queued for it",
		NoStaffReason, agent, st.CurrentLoad, st.MaxConcurrent)
	if _, err := tx.Exec(ctx, `UPDATE visitor_waiting_queue SET status = 'queued', source = 'no_staff', reason = $2,
		updated_at = now() WHERE id = $1`, r.ID, limitRunes(reason, MaxReason)); err != nil {
		return Entry{}, false, "", err
	}
	e, err = entry(ctx, tx, r.ID)
	return e, true, "", err
}

// projectStaffNote says why the project had no agent for a transfer.
func projectStaffNote(ctx context.Context, tx pgx.Tx, project uuid.UUID) (string, error) {
	var online int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM staff WHERE project_id = $1 AND availability = 'online'`,
		project).Scan(&online); err != nil {
		return "", err
	}
	if online == 0 {
		return "no agent of the project is online", nil
	}
	return fmt.Sprintf("all %d online agents of the project are busy", online), nil
}

// limitRunes cuts s to at most n characters.
func limitRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}
