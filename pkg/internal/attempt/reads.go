package attempt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// This file is the owner's reads for the read model (pkg/view), the step
// runtime's doors (pkg/step) and the packages that judge a step by its
// attempts (pkg/task, pkg/compensation): no other package names the
// attempts' tables. A condition another statement embeds is built by a
// function of this file (SucceededSQL, HeldSQL, ErrorLikeSQL, SequenceSQL,
// ActivitySQL), so that the tables stay
// spelled here.

// Reader reads rows: a pool, a connection or a transaction.
type Reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SucceededSQL is the SQL condition "the part has a succeeded attempt";
// task, step and part are SQL expressions of the embedding statement.
func SucceededSQL(task, step, part string) string {
	return `EXISTS (SELECT 1 FROM task_steps sa WHERE sa.task_id = ` + task + ` AND sa.step = ` + step +
		` AND sa.part = ` + part + ` AND sa.status = 'succeeded')`
}

// HeldSQL is the SQL condition "an attempt of the step holds a lease live
// at the database's clock"; task and step are SQL expressions.
func HeldSQL(task, step string) string {
	return `EXISTS (SELECT 1 FROM task_steps sa WHERE sa.task_id = ` + task + ` AND sa.step = ` + step +
		` AND sa.status = 'running' AND sa.lease_until > now())`
}

// InFlightSQL is the query of how many parts of step each task of tasks
// has in the queues: registered, not held back by its window (held_parts)
// and not succeeded; columns task_id and n. step is an SQL expression,
// tasks a query of task ids.
func InFlightSQL(step, tasks string) string {
	return `SELECT p.task_id, count(*) AS n FROM step_parts p
	     WHERE p.step = ` + step + ` AND p.task_id IN (` + tasks + `)
	       AND NOT EXISTS (SELECT 1 FROM held_parts h WHERE h.task_id = p.task_id AND h.step = p.step AND h.part = p.part)
	       AND NOT ` + SucceededSQL("p.task_id", "p.step", "p.part") + `
	     GROUP BY p.task_id`
}

// FannedOutSQL is the SQL condition "the task's step was fanned out into
// named parts" (a long recording's asr chunks); task and step are SQL
// expressions.
func FannedOutSQL(task, step string) string {
	return `EXISTS (SELECT 1 FROM step_parts fp WHERE fp.task_id = ` + task + ` AND fp.step = ` + step + ` AND fp.part <> '')`
}

// ErrorLikeSQL is the SQL condition "an attempt of the task failed with an
// error matching the LIKE pattern"; task and pattern are SQL expressions.
func ErrorLikeSQL(task, pattern string) string {
	return `EXISTS (SELECT 1 FROM task_steps sa WHERE sa.task_id = ` + task + ` AND sa.error ILIKE ` + pattern + `)`
}

// SequenceSQL is the query of the task's attempts (every column) with, for
// each, the start and number of the next attempt of its part (next_start,
// next_attempt; NULL for the last). task is an SQL expression.
func SequenceSQL(task string) string {
	return `SELECT s.*, lead(s.started_at) OVER w AS next_start, lead(s.attempt) OVER w AS next_attempt
    FROM task_steps s WHERE s.task_id = ` + task + `
  WINDOW w AS (PARTITION BY s.step, s.part ORDER BY s.attempt)`
}

// HandBacksSQL is the query of the task's hand-backs: the ones the
// runtime recorded (step_handbacks: a message handed back or checked again
// later without an outcome) and the attempts that ended waiting for an
// engine (wait_reason: the pool's wait, which spends no retry either).
// Columns: first_at, last_at, step, part, attempt, worker, reason, detail,
// count. task is an SQL expression.
func HandBacksSQL(task string) string {
	return `SELECT h.first_at, h.last_at, h.step, h.part, h.attempt, h.worker, h.reason, h.detail, h.count
    FROM step_handbacks h WHERE h.task_id = ` + task + `
  UNION ALL
  SELECT s.finished_at, s.finished_at, s.step, s.part, s.attempt, s.worker, 'wait_' || s.wait_reason,
         'until ' || to_char(s.wait_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') ||
         CASE WHEN s.error <> '' THEN ': ' || s.error ELSE '' END, 1
    FROM task_steps s WHERE s.task_id = ` + task + ` AND s.wait_until IS NOT NULL AND s.finished_at IS NOT NULL`
}

// ActivitySQL is the query of the attempts of the steps (an SQL text[]) at
// the instant at (an SQL timestamptz): rows (series, step, value) of
// step_attempts (started in the minute before at), error_rate (failed of
// those finished in the 5 minutes before at), step_duration_p50 and
// step_duration_p95 (seconds, of those). Only attempts started in the hour
// before at are read, so that the index on started_at serves it.
func ActivitySQL(at, steps string) string {
	return `SELECT 'step_attempts' AS series, p.step AS key, count(s.id)::float8 AS value
    FROM unnest(` + steps + `) p(step)
    LEFT JOIN task_steps s ON s.step = p.step AND s.started_at > ` + at + ` - interval '1 minute' AND s.started_at <= ` + at + `
   GROUP BY p.step
  UNION ALL
  SELECT x.series, f.step, x.value FROM (
    SELECT step, count(*) FILTER (WHERE status = 'failed')::float8 / count(*) AS rate,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)) AS p95
      FROM task_steps WHERE step = ANY(` + steps + `) AND started_at > ` + at + ` - interval '1 hour'
       AND finished_at > ` + at + ` - interval '5 minutes' AND finished_at <= ` + at + `
     GROUP BY step) f,
    LATERAL (VALUES ('error_rate', f.rate), ('step_duration_p50', f.p50), ('step_duration_p95', f.p95)) x(series, value)`
}

// Row is one attempt as the read model shows it.
type Row struct {
	ID         int64
	TaskID     uuid.UUID
	Step       string
	Part       string
	Attempt    int
	Status     string
	Worker     string
	StartedAt  time.Time
	FinishedAt *time.Time
	Error      string
	// WaitReason and WaitUntil are set on an attempt that found no engine
	// free (no_quota, rate_limit, no_engine): the step goes on at WaitUntil.
	WaitReason string
	WaitUntil  *time.Time
	// QueueWaitMS is how long the attempt's message waited in its queue
	// before the claim that created the attempt (nil: not measured).
	QueueWaitMS *int64
}

// Rows reads the attempts of the tasks that started or finished after
// since (the zero time: all of them), with running also those running now,
// in the order they started.
func Rows(ctx context.Context, q Reader, tasks []uuid.UUID, since time.Time, running bool) ([]Row, error) {
	rows, err := q.Query(ctx, `SELECT id, task_id, step, part, attempt, status, worker, started_at,
		finished_at, error, wait_reason, wait_until, queue_wait_ms FROM task_steps WHERE task_id = ANY($1)
		AND (($3::boolean AND status = 'running') OR started_at > $2 OR finished_at > $2)
		ORDER BY started_at, id`, tasks, since, running)
	if err != nil {
		return nil, fmt.Errorf("read step attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var a Row
		return a, r.Scan(&a.ID, &a.TaskID, &a.Step, &a.Part, &a.Attempt, &a.Status, &a.Worker, &a.StartedAt,
			&a.FinishedAt, &a.Error, &a.WaitReason, &a.WaitUntil, &a.QueueWaitMS)
	})
	if err != nil {
		return nil, fmt.Errorf("read step attempts: %w", err)
	}
	return out, nil
}

// Part is one registered part of a step, with the message emitted for it.
type Part struct {
	Step    string
	Part    string
	Message []byte
}

// Parts reads the parts registered for the task, of step (every step for
// ""), in the order they were registered.
func Parts(ctx context.Context, q Reader, task uuid.UUID, step string) ([]Part, error) {
	rows, err := q.Query(ctx, `SELECT step, part, message FROM step_parts
		WHERE task_id = $1 AND ($2 = '' OR step = $2) ORDER BY created_at, part`, task, step)
	if err != nil {
		return nil, fmt.Errorf("read parts of %s: %w", task, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Part, error) {
		var p Part
		return p, r.Scan(&p.Step, &p.Part, &p.Message)
	})
	if err != nil {
		return nil, fmt.Errorf("read parts of %s: %w", task, err)
	}
	return out, nil
}

// LastMessage returns the message the task's latest attempt of step (of any
// part) ran from, nil when none recorded one.
func LastMessage(ctx context.Context, q Reader, task uuid.UUID, step string) ([]byte, error) {
	var body []byte
	err := q.QueryRow(ctx, `SELECT message FROM task_steps
		WHERE task_id = $1 AND step = $2 AND message IS NOT NULL
		ORDER BY id DESC LIMIT 1`, task, step).Scan(&body)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read %s message of %s: %w", step, task, err)
	}
	return body, nil
}

// UnfinishedMessages returns the message of each part of the task's step
// without a success: the one its latest attempt ran from, or the one
// registered when the step was fanned out (nil where neither is known).
func UnfinishedMessages(ctx context.Context, q Reader, task uuid.UUID, step string) ([][]byte, error) {
	rows, err := q.Query(ctx, `SELECT coalesce(
			(SELECT ts.message FROM task_steps ts WHERE ts.task_id = p.task_id AND ts.step = p.step
			   AND ts.part = p.part AND ts.message IS NOT NULL ORDER BY ts.attempt DESC LIMIT 1), p.message)
		FROM (SELECT task_id, step, part, message FROM step_parts WHERE task_id = $1 AND step = $2
		      UNION SELECT DISTINCT task_id, step, part, NULL::bytea FROM task_steps
		      WHERE task_id = $1 AND step = $2
		        AND part NOT IN (SELECT part FROM step_parts WHERE task_id = $1 AND step = $2)) p
		WHERE NOT `+SucceededSQL("p.task_id", "p.step", "p.part"), task, step)
	if err != nil {
		return nil, fmt.Errorf("read parts of %s/%s: %w", task, step, err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("read parts of %s/%s: %w", task, step, err)
	}
	return bodies, nil
}

// Load is the attempts' load on steps: those running now with a live lease,
// per step, and those started within a window.
type Load struct {
	Running map[string]int
	// Finished and Failed count the window's attempts that ended, and
	// failed; AvgMS is their mean duration (nil without one).
	Finished, Failed int
	AvgMS            *float64
}

// ReadLoad reads the load on steps: the attempts running now and those
// started within the last window.
func ReadLoad(ctx context.Context, q Reader, steps []string, window time.Duration) (Load, error) {
	l := Load{Running: map[string]int{}}
	err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE finished_at IS NOT NULL),
		count(*) FILTER (WHERE status = 'failed'),
		avg(extract(epoch FROM finished_at - started_at) * 1000) FILTER (WHERE finished_at IS NOT NULL)
		FROM task_steps WHERE step = ANY($1) AND started_at > now() - $2::interval`,
		steps, window).Scan(&l.Finished, &l.Failed, &l.AvgMS)
	if err != nil {
		return l, fmt.Errorf("read step performance: %w", err)
	}
	rows, err := q.Query(ctx, `SELECT step, count(*) FROM task_steps
		WHERE status = 'running' AND lease_until > now() GROUP BY step`)
	if err != nil {
		return l, fmt.Errorf("read running steps: %w", err)
	}
	var name string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&name, &n}, func() error { l.Running[name] = n; return nil })
	if err != nil {
		return l, fmt.Errorf("read running steps: %w", err)
	}
	return l, nil
}
