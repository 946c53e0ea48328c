package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
)

// ScanSQL selects the entries due for an attempt (arguments: retry delay in
// seconds, batch size), fairly across projects: each project's first due
// entry in service order, then each project's second, and so on, so one busy
// project cannot fill the batch and starve the others. Projects are found
// with a loose index scan and each project's entries come from the
// service-order index, so the cost follows the batch, not the backlog.
const ScanSQL = `WITH RECURSIVE projects(project_id) AS (
	(SELECT project_id FROM visitor_waiting_queue
	 WHERE status = 'waiting' ORDER BY project_id LIMIT 1)
	UNION ALL
	SELECT (SELECT w.project_id FROM visitor_waiting_queue w
	        WHERE w.status = 'waiting' AND w.project_id > p.project_id
	        ORDER BY w.project_id LIMIT 1)
	FROM projects p WHERE p.project_id IS NOT NULL
)
SELECT d.id FROM projects p
CROSS JOIN LATERAL (
	SELECT w.id, w.priority, w.arrival_seq,
	       row_number() OVER (ORDER BY w.priority DESC, w.arrival_seq) AS turn
	FROM visitor_waiting_queue w
	WHERE w.project_id = p.project_id AND w.status = 'waiting'
	  AND (w.last_attempt_at IS NULL OR w.last_attempt_at <= now() - make_interval(secs => $1))
	ORDER BY w.priority DESC, w.arrival_seq
	LIMIT $2
) d
WHERE p.project_id IS NOT NULL
ORDER BY d.turn, d.priority DESC, d.arrival_seq
LIMIT $2`

// matchableSQL lists projects with an agent with free capacity and either
// a waiting entry or visitors queued for that agent: a pair that a trigger
// missed.
var matchableSQL = `SELECT DISTINCT s.project_id FROM staff s
WHERE s.availability = 'online' AND s.current_load < s.max_concurrent
  AND (EXISTS (SELECT 1 FROM visitor_waiting_queue w
               WHERE w.project_id = s.project_id AND w.status = 'waiting')
       OR ` + fmt.Sprintf(servesOwnQueue, "s.id") + `)`

// ScanResult reports what one scan did.
type ScanResult struct {
	// Assigned lists the assignments made.
	Assigned []Entry
	// Attempted counts the due entries processed.
	Attempted int
	// Expired lists the entries that ran out of attempts.
	Expired []Entry
	// ReservationsExpired lists the unconfirmed assignments given back.
	ReservationsExpired []Entry
}

// Scan is the periodic pass over the whole queue: it first
// expires up to BatchSize overdue reservations (each an unsuccessful
// attempt, see SweepReservations), hands the visitors queued for agents
// gone offline or moved back to their project's queue (HandBack), then
// matches every project that has free capacity and waiting entries or
// visitors queued for an agent with a free unit,
// then processes up to BatchSize due entries, MaxWorkers at a time. Several
// replicas may scan at once: an attempt is recorded only while it is due,
// under the entry's row lock, so each attempt counts once.
func (q *Queue) Scan(ctx context.Context) (ScanResult, error) {
	var res ScanResult
	var errs []error
	expired, err := q.SweepReservations(ctx, q.config().BatchSize)
	res.ReservationsExpired = expired
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range expired {
		// An unconfirmed reservation is an attempt: the last one expires
		// the entry.
		if e.Status == StatusExpired && e.RetryCount >= q.config().MaxRetries {
			res.Expired = append(res.Expired, e)
		}
	}
	if _, err := q.HandBack(ctx, nil); err != nil {
		errs = append(errs, fmt.Errorf("scan: %w", err))
	}
	a, err := q.matchAll(ctx)
	res.Assigned = a
	if err != nil {
		errs = append(errs, fmt.Errorf("scan: %w", err))
	}
	due, err := q.ids(ctx, ScanSQL, q.config().RetryDelay.Seconds(), q.config().BatchSize)
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("scan: select due entries: %w", err))...)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, q.config().MaxWorkers)
	for _, id := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out, err := q.Process(ctx, id, true)
			mu.Lock()
			defer mu.Unlock()
			res.Attempted++
			res.Assigned = append(res.Assigned, out.Assigned...)
			if err != nil {
				errs = append(errs, err)
			}
			if out.Expired {
				res.Expired = append(res.Expired, out.Entry)
			}
		}()
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

// ids runs a query returning one uuid column.
func (q *Queue) ids(ctx context.Context, sql string, args ...any) ([]uuid.UUID, error) {
	rows, err := q.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
