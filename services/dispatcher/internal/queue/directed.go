package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Visitors who asked for one agent: seed 002's per-agent queue wired to
// matching. A transfer naming an agent (Transfer) assigns the visitor to
// it at once when it has a free unit, and otherwise queues the entry in
// its per-agent queue (status queued, an agent_queue_items row with the
// entry's id). A unit of that agent freed later — a release, in the
// release's own transaction; more capacity or coming online, through
// Match — goes to the oldest visitor queued for it (PairIn: seed 002's
// consumeNext and createPairing, in one statement). An agent with visitors
// queued for it is not given to the project's queue while it has a free
// unit (servesOwnQueue), so the project's matching never takes a unit its
// own queue is owed. An agent that goes offline or moves to another
// project hands its queued visitors back to their project's queue
// (HandBack).
//
// Lock order, as everywhere: entry rows (and the items standing for
// them) before staff rows, agent_queues rows last. The pairing claims the
// item and its entry with SKIP LOCKED, so it never waits for a
// cancellation; a transfer locks its (new) entry, then the agent's row.

// pairSQL pairs agent $1 with the oldest visitor queued for it (arguments:
// the agent, the reservation timeout as assignSet takes it): the item is
// consumed, a unit of the agent's capacity is reserved with a conditional
// update (online, current_load < max_concurrent, re-checked on the latest
// row version) and the entry assigned — all or nothing. Items and entries
// another transaction holds (a cancellation) are skipped; an entry of
// another project than the agent's (it moved) is left for HandBack.
var pairSQL = `WITH next AS (
	SELECT i.id AS item_id, e.id AS entry_id
	FROM agent_queue_items i JOIN visitor_waiting_queue e ON e.id = i.entry_id
	WHERE i.agent_id = $1 AND i.status = 'queued' AND i.entry_id IS NOT NULL AND e.status = 'queued'
	  AND e.project_id = (SELECT project_id FROM staff WHERE id = $1)
	ORDER BY i.seq
	LIMIT 1
	FOR UPDATE OF i, e SKIP LOCKED
), reserved AS (
	UPDATE staff s
	SET current_load = s.current_load + 1, idle_since = now(), updated_at = now()
	FROM next
	WHERE s.id = $1 AND s.availability = 'online' AND s.current_load < s.max_concurrent
	RETURNING s.id
), consumed AS (
	UPDATE agent_queue_items i SET status = 'consumed', consumed_at = now(), updated_at = now()
	FROM next, reserved WHERE i.id = next.item_id
	RETURNING i.id
)
UPDATE visitor_waiting_queue e
SET ` + assignSet + `
FROM next, reserved, consumed
WHERE e.id = next.entry_id
RETURNING ` + entryColumnsQualified

// PairIn hands the agent's free units to the visitors queued for it,
// oldest first, inside tx: each pairing consumes the item, lowers the
// agent's queue_size, assigns the entry and adds its
// event.waiting.assigned. It returns the assignments; none when the agent
// has no free unit or nobody queued for it.
func (q *Queue) PairIn(ctx context.Context, tx pgx.Tx, agent uuid.UUID) ([]Entry, error) {
	var out []Entry
	for {
		e, err := scanEntry(tx.QueryRow(ctx, pairSQL, agent, q.config().ReservationTimeout.Seconds()), false)
		if errors.Is(err, pgx.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("pair agent %s: %w", agent, err)
		}
		if err := agentqueue.Decrement(ctx, tx, agent, 1); err != nil {
			return out, fmt.Errorf("pair agent %s: %w", agent, err)
		}
		if err := addEvent(ctx, tx, EventAssigned, e); err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

// PairAgent is PairIn in a transaction of its own.
func (q *Queue) PairAgent(ctx context.Context, agent uuid.UUID) ([]Entry, error) {
	var out []Entry
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var err error
		out, err = q.PairIn(ctx, tx, agent)
		return err
	})
	return out, err
}

// PairProject pairs every agent of the project that has a free unit and
// visitors queued for it (PairAgent).
func (q *Queue) PairProject(ctx context.Context, project uuid.UUID) ([]Entry, error) {
	agents, err := q.ids(ctx, `SELECT s.id FROM staff s
		WHERE s.project_id = $1 AND s.availability = 'online' AND s.current_load < s.max_concurrent
		  AND `+fmt.Sprintf(servesOwnQueue, "s.id"), project)
	if err != nil {
		return nil, fmt.Errorf("pair project %s: %w", project, err)
	}
	var out []Entry
	for _, a := range agents {
		paired, err := q.PairAgent(ctx, a)
		out = append(out, paired...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// handBackSQL puts the visitors queued for agents that went offline or
// moved to another project back in their project's queue (argument: one
// agent, or NULL for every one): the items are cancelled (by the
// dispatcher), the agents' queue_size lowered, the entries waiting again
// at their arrival place (arrival_seq kept). It returns the entries'
// projects.
const handBackSQL = `WITH gone AS (
	SELECT i.id AS item_id, i.agent_id, e.id AS entry_id
	FROM agent_queue_items i
	JOIN visitor_waiting_queue e ON e.id = i.entry_id
	JOIN staff s ON s.id = i.agent_id
	WHERE i.status = 'queued' AND e.status = 'queued'
	  AND (s.availability = 'offline' OR s.project_id <> e.project_id)
	  AND ($1::uuid IS NULL OR i.agent_id = $1::uuid)
	FOR UPDATE OF i, e SKIP LOCKED
), items AS (
	UPDATE agent_queue_items i SET status = 'cancelled', cancelled_at = now(),
	    cancelled_by = 'dispatcher: the agent went offline or moved', updated_at = now()
	FROM gone WHERE i.id = gone.item_id
	RETURNING i.agent_id
), sizes AS (
	UPDATE agent_queues a SET queue_size = a.queue_size - c.n, updated_at = now()
	FROM (SELECT agent_id, count(*) AS n FROM items GROUP BY agent_id) c
	WHERE a.agent_id = c.agent_id
)
UPDATE visitor_waiting_queue e SET status = 'waiting', updated_at = now()
FROM gone WHERE e.id = gone.entry_id
RETURNING e.project_id`

// HandBack puts the visitors queued for an agent that is offline or in
// another project than theirs back in their project's queue (agent nil:
// every such agent) and returns their projects, once each; the caller
// matches them. An agent that is away keeps its queue (it is paired when
// the agent is online again).
func (q *Queue) HandBack(ctx context.Context, agent *uuid.UUID) ([]uuid.UUID, error) {
	projects, err := q.ids(ctx, handBackSQL, agent)
	if err != nil {
		return nil, fmt.Errorf("hand back queued visitors: %w", err)
	}
	slices.SortFunc(projects, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(projects), nil
}

// Rematch follows a change of the agent st: the visitors queued for it go
// back to their project's queue when it went offline or moved (HandBack),
// then every project concerned is matched — the agent's own when it has
// free capacity (Match pairs its own queue first). It returns the
// assignments made.
func (q *Queue) Rematch(ctx context.Context, st Staff) ([]Entry, error) {
	projects, err := q.HandBack(ctx, &st.ID)
	if err != nil {
		return nil, err
	}
	if st.FreeCapacity > 0 && !slices.Contains(projects, st.ProjectID) {
		projects = append(projects, st.ProjectID)
	}
	var out []Entry
	var errs []error
	for _, p := range projects {
		a, err := q.Match(ctx, p)
		out = append(out, a...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}
