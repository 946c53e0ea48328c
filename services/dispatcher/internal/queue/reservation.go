package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Reservations. An assignment reserves one unit of the agent's
// capacity until ReservationTimeout has passed; the agent confirms it, or
// the reservation expires and the entry goes back to the queue at its place
// with the unit given back. A release ends an assignment once, whatever the
// number of calls. Lock order everywhere: entry rows, then staff rows; the
// claims of assignSQL skip locked rows, so nothing waits in a cycle.

// EventReservationExpired: an unconfirmed assignment expired; the entry is
// waiting again (or expired, when the visitor queued anew meanwhile).
const EventReservationExpired = "event.waiting.reservation_expired"

// Confirm confirms an assignment: the reservation becomes final and no
// longer expires. Confirming twice is confirming once. An entry that is not
// assigned (never was, or its reservation already expired) or whose
// conversation was released gives ErrNotAssigned, saying which.
func (q *Queue) Confirm(ctx context.Context, id uuid.UUID) (Entry, error) {
	tag, err := q.pool.Exec(ctx, `UPDATE visitor_waiting_queue
		SET confirmed_at = now(), reserved_until = NULL, updated_at = now()
		WHERE id = $1 AND status = 'assigned' AND confirmed_at IS NULL`, id)
	if err != nil {
		return Entry{}, fmt.Errorf("confirm entry %s: %w", id, err)
	}
	e, err := q.Entry(ctx, id)
	if err != nil {
		return Entry{}, err
	}
	switch {
	case tag.RowsAffected() > 0 || e.Status == StatusAssigned:
		return e, nil
	case e.Status == StatusReleased:
		return e, fmt.Errorf("confirm entry %s: its conversation ended (released at %s), there is nothing to confirm: %w",
			id, e.ReleasedAt.UTC().Format(time.RFC3339), ErrNotAssigned)
	}
	return e, fmt.Errorf("confirm entry %s (%s): %w", id, e.Status, ErrNotAssigned)
}

// Released is what ReleaseEntry did.
type Released struct {
	// Entry is the released entry as it is afterwards.
	Entry Entry
	// Released is false when the entry was already released (nothing
	// changed).
	Released bool
	// Paired lists the visitors queued for the agent that the freed unit
	// went to, in the release's transaction (seed 002's consumeNext and
	// pairing): at most one, unless the agent had more free units.
	Paired []Entry
}

// ReleaseAssignment is ReleaseEntry without the pairings it made.
func (q *Queue) ReleaseAssignment(ctx context.Context, id uuid.UUID) (e Entry, released bool, err error) {
	r, err := q.ReleaseEntry(ctx, id)
	return r.Entry, r.Released, err
}

// ReleaseEntry ends the entry's assigned conversation (the entry is
// released), gives the agent's unit back and, in the same transaction,
// hands the unit to the oldest visitor queued for that agent (PairIn).
// Releasing a released entry changes nothing and reports Released =
// false (twice = once). An entry that was never assigned, or no longer
// is, gives ErrNotAssigned. Callers follow a release with Match on the
// entry's project.
func (q *Queue) ReleaseEntry(ctx context.Context, id uuid.UUID) (Released, error) {
	var out Released
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var staff uuid.UUID
		err := tx.QueryRow(ctx, `UPDATE visitor_waiting_queue
			SET status = 'released', released_at = now(), reserved_until = NULL, updated_at = now()
			WHERE id = $1 AND status = 'assigned'
			RETURNING assigned_staff_id`, id).Scan(&staff)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		out.Released = true
		if err := giveBack(ctx, tx, staff); err != nil {
			return err
		}
		out.Paired, err = q.PairIn(ctx, tx, staff)
		return err
	})
	if err != nil {
		return Released{}, fmt.Errorf("release entry %s: %w", id, err)
	}
	if out.Entry, err = q.Entry(ctx, id); err != nil {
		return Released{}, err
	}
	if !out.Released && out.Entry.Status != StatusReleased {
		return out, fmt.Errorf("release entry %s (%s): %w", id, out.Entry.Status, ErrNotAssigned)
	}
	return out, nil
}

// giveBack lowers the agent's load by the one assignment that just ended
// inside tx.
func giveBack(ctx context.Context, tx pgx.Tx, staff uuid.UUID) error {
	tag, err := tx.Exec(ctx, `UPDATE staff SET current_load = current_load - 1, updated_at = now()
		WHERE id = $1 AND current_load > 0`, staff)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("staff %s has no load to give back", staff)
	}
	return err
}

// SweepReservations expires up to limit overdue reservations, oldest first,
// each in its own transaction (expireReservation). Several replicas may
// sweep at once: rows another one holds are skipped. It returns the entries
// as they are afterwards; the caller matches their projects.
func (q *Queue) SweepReservations(ctx context.Context, limit int) ([]Entry, error) {
	var out []Entry
	for len(out) < limit {
		var e Entry
		var found bool
		err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
			var err error
			e, found, err = q.expireReservation(ctx, tx)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("sweep reservations: %w", err)
		}
		if !found {
			return out, nil
		}
		out = append(out, e)
	}
	return out, nil
}

// expireReservationSQL ends the reservation of entry $1: an unconfirmed
// assignment is an unsuccessful attempt, so it is counted (retry_count,
// last_attempt_at) and the entry goes back to waiting at its place
// (arrival_seq is kept) — or expires, when that was attempt $2
// (QUEUE_PROCESS_MAX_RETRIES) or the visitor queued anew meanwhile (is
// waiting, or queued for an agent). An entry that was paired from an
// agent's queue goes back to its project's queue: the agent asked for did
// not take it, any agent may.
const expireReservationSQL = `UPDATE visitor_waiting_queue e
	SET status = CASE WHEN again OR e.retry_count + 1 >= $2 THEN 'expired' ELSE 'waiting' END,
	    exited_at = CASE WHEN again OR e.retry_count + 1 >= $2 THEN now() END,
	    retry_count = e.retry_count + 1, last_attempt_at = now(),
	    assigned_staff_id = NULL, assigned_at = NULL, reserved_until = NULL,
	    updated_at = now()
	FROM (SELECT EXISTS (
		SELECT 1 FROM visitor_waiting_queue o, visitor_waiting_queue me
		WHERE me.id = $1 AND o.project_id = me.project_id AND o.visitor_id = me.visitor_id
		  AND o.status IN ('waiting', 'queued') AND o.id <> me.id) AS again) visitor
	WHERE e.id = $1
	RETURNING ` + entryColumnsQualified

// expireReservation expires the oldest overdue reservation no other
// transaction holds, inside tx: the entry is attempted once more and waits
// again or expires (expireReservationSQL), the agent's unit is given back,
// and event.waiting.reservation_expired is added — with
// event.waiting.expired too when the entry ran out of attempts. found is
// false when no reservation is overdue.
func (q *Queue) expireReservation(ctx context.Context, tx pgx.Tx) (e Entry, found bool, err error) {
	var id, staff uuid.UUID
	err = tx.QueryRow(ctx, `SELECT id, assigned_staff_id FROM visitor_waiting_queue
		WHERE status = 'assigned' AND confirmed_at IS NULL AND released_at IS NULL
		  AND reserved_until < now()
		ORDER BY reserved_until
		LIMIT 1
		FOR UPDATE SKIP LOCKED`).Scan(&id, &staff)
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	if e, err = scanEntry(tx.QueryRow(ctx, expireReservationSQL, id, q.config().MaxRetries), false); err != nil {
		return Entry{}, false, err
	}
	if err := giveBack(ctx, tx, staff); err != nil {
		return Entry{}, false, err
	}
	if err := addEvent(ctx, tx, EventReservationExpired, e); err != nil {
		return Entry{}, false, err
	}
	if e.Status == StatusExpired && e.RetryCount >= q.config().MaxRetries {
		err = addEvent(ctx, tx, EventExpired, e)
	}
	return e, true, err
}

// StuckEntries counts the entries no replica is moving on: waiting entries
// not attempted for RetryDelay+StuckAfter (the scan should have attempted or
// expired them), and reservations overdue by StuckAfter (the sweep should
// have expired them), and visitors queued for an agent for StuckAfter
// while the agent has a free unit (the release or the match should have
// paired them) or is offline or in another project (the scan should have
// handed them back). It is the value of dubflow_dispatcher_stuck_entries.
func (q *Queue) StuckEntries(ctx context.Context) (int, error) {
	var n int
	err := q.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM visitor_waiting_queue
		 WHERE status = 'waiting' AND coalesce(last_attempt_at, entered_at) < now() - make_interval(secs => $1::float8 + $2::float8))
		+ (SELECT count(*) FROM visitor_waiting_queue
		 WHERE status = 'assigned' AND confirmed_at IS NULL AND released_at IS NULL
		   AND reserved_until < now() - make_interval(secs => $2::float8))
		+ (SELECT count(*) FROM visitor_waiting_queue e JOIN staff s ON s.id = e.requested_staff_id
		 WHERE e.status = 'queued' AND e.updated_at < now() - make_interval(secs => $2::float8)
		   AND (s.availability = 'offline' OR s.project_id <> e.project_id
		        OR (s.availability = 'online' AND s.current_load < s.max_concurrent)))`,
		q.config().RetryDelay.Seconds(), q.config().StuckAfter.Seconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count stuck entries: %w", err)
	}
	return n, nil
}

// Recovery reports what Recover did.
type Recovery struct {
	// ReservationsExpired lists the overdue reservations given back.
	ReservationsExpired []Entry
	// LoadsRepaired counts agents whose current_load differed from their
	// open assignments.
	LoadsRepaired int
	// Assigned lists the assignments made for pairs left unmatched.
	Assigned []Entry
}

// Recover finishes what a crashed replica left undone. Every change of the
// queue is one transaction, so a crash leaves no half-written row; what it
// can leave is the work that was due after a commit: reservations it handed
// out that will never be confirmed (expired now, not after the next scan),
// a release or an enqueue whose matching never ran (every project with
// free capacity and a waiting entry or a visitor queued for the free agent
// is matched; visitors queued for an agent gone offline or moved go back
// to their project's queue first), and — a safety net for
// manual edits — agents whose load differs from their open assignments
// (recomputed under the agent's row lock, so a concurrent assignment or
// release is counted exactly once). Any number of replicas may recover at
// once, alongside live traffic.
func (q *Queue) Recover(ctx context.Context) (Recovery, error) {
	var rec Recovery
	var errs []error
	expired, err := q.SweepReservations(ctx, 1<<30)
	rec.ReservationsExpired = expired
	if err != nil {
		errs = append(errs, err)
	}
	if rec.LoadsRepaired, err = q.repairLoads(ctx); err != nil {
		errs = append(errs, err)
	}
	if _, err := q.HandBack(ctx, nil); err != nil {
		errs = append(errs, err)
	}
	a, err := q.matchAll(ctx)
	rec.Assigned = a
	if err != nil {
		errs = append(errs, err)
	}
	return rec, errors.Join(errs...)
}

// openAssignmentsSQL counts an agent's open assignments (argument: staff id).
const openAssignmentsSQL = `SELECT count(*) FROM visitor_waiting_queue
	WHERE assigned_staff_id = $1 AND status = 'assigned' AND released_at IS NULL`

// repairLoads sets current_load to the number of open assignments for every
// agent where they differ, and returns how many it changed.
func (q *Queue) repairLoads(ctx context.Context) (int, error) {
	return staffLoad.Repair(ctx, q.pool)
}

// staffLoad is an agent's current_load: the number of its open assignments.
// The claims skip locked agents, so none is made while the count is taken.
var staffLoad = store.Counter{Name: "load", Of: "staff",
	Suspects: `SELECT s.id FROM staff s WHERE s.current_load <>
		(SELECT count(*) FROM visitor_waiting_queue w
		 WHERE w.assigned_staff_id = s.id AND w.status = 'assigned' AND w.released_at IS NULL)`,
	Stored: `SELECT current_load FROM staff WHERE id = $1 FOR UPDATE`,
	Count:  openAssignmentsSQL,
	Set:    `UPDATE staff SET current_load = $2, updated_at = now() WHERE id = $1`}

// matchAll matches every project with both a waiting entry and an agent
// with free capacity.
func (q *Queue) matchAll(ctx context.Context) ([]Entry, error) {
	projects, err := q.ids(ctx, matchableSQL)
	if err != nil {
		return nil, fmt.Errorf("list matchable projects: %w", err)
	}
	var out []Entry
	var errs []error
	for _, p := range projects {
		a, err := q.Match(ctx, p)
		out = append(out, a...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
