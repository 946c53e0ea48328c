package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// servesOwnQueue tells whether the agent whose id is %s has visitors
// queued for it (seed 002's per-agent queue): such an agent's free units go
// to them first (pairing), never to the project's queue.
const servesOwnQueue = `EXISTS (SELECT 1 FROM agent_queue_items i
	WHERE i.agent_id = %s AND i.status = 'queued' AND i.entry_id IS NOT NULL)`

// assignSet is the SET list of an assignment to the agent reserved.id
// ($2: the reservation timeout in seconds, fractions kept (float8: an
// untyped $2 compared with 0 would be read as an integer, and 0.2 s would
// confirm at once), 0 for an assignment confirmed at once).
const assignSet = `status = 'assigned', assigned_staff_id = reserved.id, assigned_at = now(),
    exited_at = now(), last_attempt_at = now(), updated_at = now(),
    reserved_until = CASE WHEN $2::float8 > 0 THEN now() + make_interval(secs => $2::float8) END,
    confirmed_at = CASE WHEN $2::float8 > 0 THEN NULL ELSE now() END,
    released_at = NULL`

// assignSQL claims the head of a project's queue and reserves one unit of
// the best agent's capacity in one statement (arguments: project id, the
// reservation timeout as assignSet takes it). The agent is the online one
// with the most free capacity, ties to the one idle longest, among those
// not serving their own queue (servesOwnQueue); rows another transaction
// holds are skipped (SKIP LOCKED), and the reservation is a conditional
// update re-checked on the latest row version, so no agent goes over
// capacity and no entry is assigned twice. Without both an agent and an
// entry nothing changes.
var assignSQL = `WITH agent AS (
	SELECT id FROM staff
	WHERE project_id = $1 AND availability = 'online' AND current_load < max_concurrent
	  AND NOT ` + fmt.Sprintf(servesOwnQueue, "staff.id") + `
	ORDER BY max_concurrent - current_load DESC, idle_since, id
	LIMIT 1
	FOR UPDATE SKIP LOCKED
), entry AS (
	SELECT id FROM visitor_waiting_queue
	WHERE project_id = $1 AND status = 'waiting'
	ORDER BY priority DESC, arrival_seq
	LIMIT 1
	FOR UPDATE SKIP LOCKED
), reserved AS (
	UPDATE staff s
	SET current_load = s.current_load + 1, idle_since = now(), updated_at = now()
	FROM agent, entry
	WHERE s.id = agent.id AND s.availability = 'online' AND s.current_load < s.max_concurrent
	RETURNING s.id
)
UPDATE visitor_waiting_queue e
SET ` + assignSet + `
FROM reserved, entry
WHERE e.id = entry.id AND e.status = 'waiting'
RETURNING ` + entryColumnsQualified

// entryColumnsQualified is entryColumns qualified by the alias e (the
// assignment's UPDATE joins tables that share column names).
const entryColumnsQualified = `e.id, e.project_id, e.visitor_id, e.session_id, e.assigned_staff_id,
	e.source, e.urgency, e.arrival_seq, e.priority, e.status, e.visitor_message, e.reason,
	e.channel_id, e.channel_type, e.extra_metadata, e.retry_count, e.last_attempt_at,
	e.entered_at, e.assigned_at, e.exited_at, e.created_at, e.updated_at,
	e.reserved_until, e.confirmed_at, e.released_at, e.requested_staff_id`

// contendedSQL tells whether a project still has both a waiting entry and
// an agent with free capacity for it (argument: project id), locked or not.
var contendedSQL = `SELECT
	EXISTS (SELECT 1 FROM staff WHERE project_id = $1 AND availability = 'online'
	        AND current_load < max_concurrent AND NOT ` + fmt.Sprintf(servesOwnQueue, "staff.id") + `)
	AND EXISTS (SELECT 1 FROM visitor_waiting_queue WHERE project_id = $1 AND status = 'waiting')`

// contendedWait bounds how long Match waits for a concurrent matcher that
// holds the free agent or the head entry.
const contendedWait = 3 * time.Second

// Match first pairs the project's agents that have free units with the
// visitors queued for them (PairProject), then assigns the head of the
// project's queue to the other free agents until either has run out, and
// returns the assignments in order. It runs on enqueue and whenever
// capacity frees up; any number of Match calls may run at once on one
// project, in any number of processes.
func (q *Queue) Match(ctx context.Context, project uuid.UUID) ([]Entry, error) {
	out, err := q.PairProject(ctx, project)
	if err != nil {
		return out, err
	}
	misses := 0
	// A concurrent matcher holds its rows for one short transaction; wait
	// for it up to contendedWait (under load that can be far longer than
	// a few milliseconds), then leave the pair to the periodic scan.
	giveUp := time.Now().Add(contendedWait)
	for {
		e, ok, err := q.assignOne(ctx, project)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, e)
			misses = 0
			continue
		}
		// Nothing was assigned: either nothing is left, or the free agent
		// or the head entry was held by a concurrent matcher. In the second
		// case that matcher may have looked before our entry existed, so
		// look again shortly rather than leave the pair for the scan.
		var contended bool
		if err := q.pool.QueryRow(ctx, contendedSQL, project).Scan(&contended); err != nil {
			return out, fmt.Errorf("match project %s: %w", project, err)
		}
		if !contended || time.Now().After(giveUp) {
			return out, nil
		}
		misses = min(misses+1, 20)
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(time.Duration(misses) * time.Millisecond):
		}
	}
}

// assignOne makes at most one assignment in project and publishes
// event.waiting.assigned in the same transaction.
func (q *Queue) assignOne(ctx context.Context, project uuid.UUID) (Entry, bool, error) {
	var e Entry
	var ok bool
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var err error
		e, ok, err = q.assignIn(ctx, tx, project)
		return err
	})
	if err != nil {
		return Entry{}, false, err
	}
	return e, ok, nil
}

// assignIn makes at most one assignment in project inside tx, with its
// event.waiting.assigned.
func (q *Queue) assignIn(ctx context.Context, tx pgx.Tx, project uuid.UUID) (Entry, bool, error) {
	e, err := scanEntry(tx.QueryRow(ctx, assignSQL, project, q.config().ReservationTimeout.Seconds()), false)
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("assign in project %s: %w", project, err)
	}
	return e, true, addEvent(ctx, tx, EventAssigned, e)
}
