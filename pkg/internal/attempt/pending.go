package attempt

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/store"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A pending part is a part of a queued or running task whose message should
// be somewhere on its way to a worker: emitted (step_parts; the task row
// itself for the first step, whose message dubctl submit publishes; or any
// part with an attempt in task_steps), retried
// (its last attempt failed and the retry went to a delay tier), re-driven
// (step_replays names an attempt not claimed yet), or held by a worker whose
// lease ran out (the broker hands the message to another worker). It is not
// pending once an attempt succeeded or holds a live lease, or when its last
// attempt was parked or dead-lettered and nothing re-drove it since.
//
// pendingPartsSQL lists them with the time of their last activity: the
// emission, the last attempt's start, end or lease, the time a waiting
// attempt can go on (wait_until, in the future while it waits: a part
// waiting for an engine is active, not lost), the last replay.
// Arguments: $1 the steps to look at (text[]); @now stands for the clock
// (pendingSQL numbers it).
const pendingPartsSQL = `WITH live AS (
    SELECT t.id, t.created_at FROM tasks t WHERE t.status IN ('queued', 'running')
), keys AS (
    SELECT p.task_id, p.step, p.part FROM live JOIN step_parts p ON p.task_id = live.id
     WHERE p.step = ANY($1::text[])
    UNION
    SELECT s.task_id, s.step, s.part FROM live JOIN task_steps s ON s.task_id = live.id
     WHERE s.step = ANY($1::text[])
    UNION
    SELECT live.id, 'extract_audio', '' FROM live WHERE 'extract_audio' = ANY($1::text[])
), parts AS (
    SELECT k.task_id, k.step, k.part, coalesce(p.created_at, live.created_at) AS queued_at, p.message
      FROM keys k JOIN live ON live.id = k.task_id
      LEFT JOIN step_parts p ON p.task_id = k.task_id AND p.step = k.step AND p.part = k.part
), pending AS (
    SELECT parts.task_id, parts.step, parts.part,
           coalesce(last.id, 0) AS attempt_id, coalesce(last.attempt, 0) AS attempt,
           coalesce(last.status, '') AS status,
           coalesce(last.message, parts.message) AS message,
           greatest(parts.queued_at, last.started_at, last.finished_at, last.lease_until, last.wait_until, r.created_at) AS last_activity
      FROM parts
      LEFT JOIN LATERAL (SELECT s.id, s.attempt, s.status, s.started_at, s.finished_at, s.lease_until, s.wait_until, s.message
                           FROM task_steps s
                          WHERE s.task_id = parts.task_id AND s.step = parts.step AND s.part = parts.part
                          ORDER BY s.attempt DESC LIMIT 1) last ON true
      LEFT JOIN LATERAL (SELECT max(r.base_attempt) AS base_attempt, max(r.created_at) AS created_at
                           FROM step_replays r
                          WHERE r.task_id = parts.task_id AND r.step = parts.step AND r.part = parts.part) r ON true
     WHERE NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = parts.task_id AND s.step = parts.step
                         AND s.part = parts.part AND s.status = 'succeeded')
       -- a held part is not lost: it waits for its task's window (held_parts)
       AND NOT EXISTS (SELECT 1 FROM held_parts h WHERE h.task_id = parts.task_id AND h.step = parts.step
                         AND h.part = parts.part)
       AND (last.status IS DISTINCT FROM 'running' OR last.lease_until < @now)
       AND (last.status IS DISTINCT FROM 'parked' OR r.base_attempt > last.attempt)
       AND (last.status IS DISTINCT FROM 'failed' OR r.base_attempt > last.attempt
            OR NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.task_id = parts.task_id AND d.step = parts.step
                             AND d.attempt = last.attempt AND d.replayed_at IS NULL))
)
`

// idleSQL is the condition under which a pending part counts as idle: a
// held attempt whose lease ran out more than $3 ago, any other part without
// activity for $2.
const idleSQL = `CASE WHEN status = 'running' THEN last_activity < @now - $3::interval
                 ELSE last_activity < @now - $2::interval END`

// pendingSQL is pendingPartsSQL followed by query, with the clock @now
// given as argument n (NULL: the database's clock).
func pendingSQL(query string, n int) string {
	return strings.ReplaceAll(pendingPartsSQL+query, "@now", fmt.Sprintf("coalesce($%d::timestamptz, now())", n))
}

// PendingThresholds say when a pending part counts, and when it is idle.
type PendingThresholds struct {
	// Idle is how long a part may go without activity before it is idle.
	Idle time.Duration
	// LeaseGrace is how long after its lease ran out a held part is idle.
	LeaseGrace time.Duration
	// Settle leaves out of the counts parts whose last activity is younger
	// than this: their message may be between the outbox and the queue.
	Settle time.Duration
}

// PendingCount is how many parts of a step are pending, and how many of
// them are idle.
type PendingCount struct {
	Pending, Idle int
}

// CountPendingParts counts, per step of steps, the pending parts whose last
// activity is older than th.Settle, and the idle ones among them, at now
// (nil: the database's clock). It runs on the statement's snapshot: call it
// after reading the broker's queue depths, so that a message consumed in
// between is seen claimed here.
func CountPendingParts(ctx context.Context, q store.Querier, steps []string, th PendingThresholds, now *time.Time) (map[string]PendingCount, error) {
	rows, err := q.Query(ctx, pendingSQL(`SELECT step, count(*), count(*) FILTER (WHERE `+idleSQL+`)
		FROM pending WHERE last_activity < @now - $4::interval GROUP BY step`, 5), steps, th.Idle, th.LeaseGrace, th.Settle, now)
	if err != nil {
		return nil, fmt.Errorf("count pending parts: %w", err)
	}
	counts := map[string]PendingCount{}
	var stepName string
	var c PendingCount
	_, err = pgx.ForEachRow(rows, []any{&stepName, &c.Pending, &c.Idle}, func() error {
		counts[stepName] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count pending parts: %w", err)
	}
	return counts, nil
}

// PendingPart is one idle pending part.
type PendingPart struct {
	TaskID     uuid.UUID
	Step, Part string
	// AttemptID, Attempt and Status describe the part's last attempt (zero
	// and "" when it never ran).
	AttemptID int64
	Attempt   int
	Status    string
	// Message is the envelope to re-drive from: the last attempt's, else the
	// one emitted for the part; nil when neither was kept.
	Message      []byte
	LastActivity time.Time
}

// IdlePendingParts returns up to limit idle pending parts of step at now
// (nil: the database's clock) whose last activity is before before (any
// when before is zero), those idle longest first.
func IdlePendingParts(ctx context.Context, q store.Querier, stepName string, th PendingThresholds, before time.Time, limit int, now *time.Time) ([]PendingPart, error) {
	var until *time.Time
	if !before.IsZero() {
		until = &before
	}
	rows, err := q.Query(ctx, pendingSQL(`SELECT task_id, step, part, attempt_id, attempt, status, message, last_activity
		FROM pending WHERE `+idleSQL+` AND ($5::timestamptz IS NULL OR last_activity < $5)
		ORDER BY last_activity, task_id, part LIMIT $4`, 6),
		[]string{stepName}, th.Idle, th.LeaseGrace, limit, until, now)
	if err != nil {
		return nil, fmt.Errorf("find idle %s parts: %w", stepName, err)
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PendingPart, error) {
		var p PendingPart
		return p, row.Scan(&p.TaskID, &p.Step, &p.Part, &p.AttemptID, &p.Attempt, &p.Status, &p.Message, &p.LastActivity)
	})
	if err != nil {
		return nil, fmt.Errorf("find idle %s parts: %w", stepName, err)
	}
	return parts, nil
}

// StepProgress returns, per step of steps, how far its workers got in the
// order messages were emitted: the latest emission time (of the part, or
// of the task for the first step) among the attempts claimed within the
// last window. A pending part emitted well before that was overtaken: in a
// queue that hands out its oldest messages first, its message would have
// been delivered before. now is the clock (nil: the database's).
func StepProgress(ctx context.Context, q store.Querier, steps []string, window time.Duration, now *time.Time) (map[string]time.Time, error) {
	rows, err := q.Query(ctx, `SELECT s.step, max(coalesce(p.created_at, t.created_at))
		  FROM task_steps s JOIN tasks t ON t.id = s.task_id
		  LEFT JOIN step_parts p ON p.task_id = s.task_id AND p.step = s.step AND p.part = s.part
		 WHERE s.step = ANY($1::text[]) AND s.started_at > coalesce($3::timestamptz, now()) - $2::interval
		 GROUP BY s.step`, steps, window, now)
	if err != nil {
		return nil, fmt.Errorf("read step progress: %w", err)
	}
	progress := map[string]time.Time{}
	var stepName string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&stepName, &at}, func() error {
		progress[stepName] = at
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read step progress: %w", err)
	}
	return progress, nil
}

// RedriveReasonPrefix starts the reason of every replay the reconciler
// records in step_replays.
const RedriveReasonPrefix = "reconciler:"

// CountNeedlessRedrives counts the reconciler's re-drives that turned out
// needless: the part's earlier message was only waiting, since an attempt
// numbered below the re-drive's started after the re-drive was recorded.
// The chaos run reports it as "re-drives of steps that were only waiting".
func CountNeedlessRedrives(ctx context.Context, q store.Querier) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM step_replays r
		WHERE r.reason LIKE $1 || '%'
		  AND EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = r.task_id AND s.step = r.step AND s.part = r.part
		              AND s.attempt < r.base_attempt AND s.started_at > r.created_at)`, RedriveReasonPrefix).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count needless re-drives: %w", err)
	}
	return n, nil
}

// MovedOn reports whether a part moved on since its last attempt attemptID
// was read: a later attempt exists, an attempt succeeded, or one holds a
// lease that is live at now (nil: the database's clock).
func MovedOn(ctx context.Context, q store.Querier, task uuid.UUID, step, part string, attemptID int64, now *time.Time) (bool, error) {
	var moved bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM task_steps s
			WHERE s.task_id = $1 AND s.step = $2 AND s.part = $3
			  AND (s.id > $4 OR s.status = 'succeeded' OR (s.status = 'running' AND s.lease_until >= coalesce($5::timestamptz, now()))))`,
		task, step, part, attemptID, now).Scan(&moved); err != nil {
		return false, fmt.Errorf("check %s/%s part %q again: %w", task, step, part, err)
	}
	return moved, nil
}

// NextAttempt returns the next attempt number of a part nothing used yet:
// above every attempt recorded and every replay's base attempt.
func NextAttempt(ctx context.Context, q store.Querier, task uuid.UUID, step, part string) (int, error) {
	var next int
	if err := q.QueryRow(ctx, `SELECT greatest(
			(SELECT coalesce(max(attempt), 0) FROM task_steps WHERE task_id = $1 AND step = $2 AND part = $3),
			(SELECT coalesce(max(base_attempt), 0) FROM step_replays WHERE task_id = $1 AND step = $2 AND part = $3)) + 1`,
		task, step, part).Scan(&next); err != nil {
		return 0, fmt.Errorf("next attempt of %s/%s part %q: %w", task, step, part, err)
	}
	return next, nil
}

// LeaseHolders returns the tasks with an attempt that holds a lease live at
// now (nil: the database's clock): a step of theirs is running.
func LeaseHolders(ctx context.Context, q store.Querier, now *time.Time) ([]uuid.UUID, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT task_id FROM task_steps
		WHERE status = 'running' AND lease_until >= coalesce($1::timestamptz, now())`, now)
	if err != nil {
		return nil, fmt.Errorf("read tasks holding a lease: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("read tasks holding a lease: %w", err)
	}
	return ids, nil
}

// CountReplays counts the replays of the task's step whose reason starts
// with prefix, since its last replay whose reason starts with resetPrefix
// (all of them when there is none).
func CountReplays(ctx context.Context, q store.Querier, task uuid.UUID, step, prefix, resetPrefix string) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM step_replays r
		WHERE r.task_id = $1 AND r.step = $2 AND starts_with(r.reason, $3)
		  AND r.created_at > coalesce((SELECT max(o.created_at) FROM step_replays o
		                                WHERE o.task_id = $1 AND o.step = $2 AND starts_with(o.reason, $4)), '-infinity')`,
		task, step, prefix, resetPrefix).Scan(&n); err != nil {
		return 0, fmt.Errorf("count replays of %s/%s: %w", task, step, err)
	}
	return n, nil
}
