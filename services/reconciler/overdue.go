package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// overdueTasks ends the tasks nobody moves on any more, each with a recorded
// reason, so that every task ends:
//
//   - queued or running with no progress (tasks.updated_at, which every
//     step success moves) for TaskMaxIdle and no attempt holding a live
//     lease: its work is stuck beyond what re-drives fix (or waited in a
//     backlog that long);
//   - compensating for CompensatingMax: nobody re-drove the failed speech
//     synthesis (tts_requeue).
//
// The task becomes failed, its error says why, and event.task.failed is
// committed to the outbox in the same transaction.
func (r *reconciler) overdueTasks(ctx context.Context) ([]Action, error) {
	var acts []Action
	err := outbox.Commit(ctx, r.pool, r.pub, func(tx pgx.Tx) ([]int64, error) {
		tasks, err := r.findOverdue(ctx, tx)
		if err != nil {
			return nil, err
		}
		var ids []int64
		for _, o := range tasks {
			stalled, reason, err := o.reason(ctx, tx)
			if err != nil {
				return nil, err
			}
			id, err := failTask(ctx, tx, o.id, o.trace, stalled, reason)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
			acts = append(acts, Action{Kind: actionFailed, TaskID: o.id, Step: stalled, Detail: reason})
		}
		return ids, nil
	})
	if err != nil && !errors.Is(err, outbox.ErrUnpublished) {
		return nil, err
	}
	return acts, published(err)
}

// overdue is a task overdueTasks fails, locked in its transaction.
type overdue struct {
	id                   uuid.UUID
	status, trace, cause string
	idle                 time.Duration
}

// findOverdue locks the overdue tasks (a batch of them): not those with an
// attempt holding a live lease, nor those waiting for a paused step. A task
// waiting for a step that was paused and resumed is idle since the resume
// at the earliest: the pause kept it waiting, so its clock starts again.
func (r *reconciler) findOverdue(ctx context.Context, tx pgx.Tx) ([]overdue, error) {
	now := r.at()
	running, err := step.LeaseHolders(ctx, tx, now)
	if err != nil {
		return nil, err
	}
	pauses, err := worker.Pauses(ctx, tx)
	if err != nil {
		return nil, err
	}
	paused, resumed, resumedAt := []string{}, []string{}, []time.Time{}
	for _, p := range pauses {
		if p.Paused {
			paused = append(paused, p.Step)
		} else {
			resumed, resumedAt = append(resumed, p.Step), append(resumedAt, p.ChangedAt)
		}
	}
	rows, err := tx.Query(ctx, overdueSQL, r.set.TaskMaxIdle, r.set.CompensatingMax, r.set.Batch, now, running,
		wire.Pipeline, paused, resumed, resumedAt)
	if err != nil {
		return nil, fmt.Errorf("find overdue tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (overdue, error) {
		var o overdue
		return o, row.Scan(&o.id, &o.status, &o.trace, &o.cause, &o.idle)
	})
	if err != nil {
		return nil, fmt.Errorf("find overdue tasks: %w", err)
	}
	return tasks, nil
}

// overdueSQL finds the overdue tasks ($1 the idle bound, $2 the
// compensating bound, $3 the batch, $4 the clock, $5 the tasks holding a
// lease, $6 the pipeline, $7 the paused steps, $8 and $9 the resumed steps
// and when they resumed). waits is the step a queued or running task
// idle for $1 waits for, only read when a pause or a resume may matter.
const overdueSQL = `WITH clock AS (SELECT coalesce($4::timestamptz, now()) AS now)
	SELECT t.id, t.status, t.trace_id, t.error, clock.now - greatest(t.updated_at, w.resumed_at)
	  FROM tasks t CROSS JOIN clock
	  LEFT JOIN LATERAL (
	       SELECT f.s = ANY($7::text[]) AS paused,
	              (SELECT r.at FROM unnest($8::text[], $9::timestamptz[]) AS r(s, at) WHERE r.s = f.s) AS resumed_at
	         FROM (SELECT s FROM unnest($6::text[]) WITH ORDINALITY AS p(s, i)
	                WHERE NOT step_succeeded(t.id, s) ORDER BY i LIMIT 1) f
	        WHERE t.status IN ('queued', 'running') AND t.updated_at < clock.now - $1::interval
	          AND cardinality($7::text[]) + cardinality($8::text[]) > 0) w ON true
	 WHERE (t.status IN ('queued', 'running') AND greatest(t.updated_at, w.resumed_at) < clock.now - $1::interval
	        AND t.id <> ALL(coalesce($5::uuid[], '{}'))
	        AND NOT coalesce(w.paused, false))
	    OR (t.status = 'compensating' AND t.updated_at < clock.now - $2::interval)
	 ORDER BY t.updated_at LIMIT $3
	 FOR UPDATE OF t SKIP LOCKED`

// reason returns the step the task stalled at and why it fails.
func (o overdue) reason(ctx context.Context, tx pgx.Tx) (stalled, reason string, err error) {
	stalled, err = firstUnfinished(ctx, tx, o.id)
	if err != nil {
		return "", "", err
	}
	reason = fmt.Sprintf("reconciler: no progress for %s (RECONCILE_TASK_MAX_IDLE_SECONDS) while %s, waiting for %s",
		o.idle.Round(time.Second), o.status, or(stalled, "nothing"))
	if o.status == "compensating" {
		stalled = wire.StepTTS
		reason = fmt.Sprintf("reconciler: compensating for %s (RECONCILE_COMPENSATING_MAX_SECONDS) and nobody re-drove the speech synthesis (tts_requeue)",
			o.idle.Round(time.Second))
	}
	if o.cause != "" {
		reason += "; last error: " + cut(o.cause, 2000)
	}
	return stalled, reason, nil
}

// firstUnfinished returns the first pipeline step of task id that has not
// succeeded ("" when all have).
func firstUnfinished(ctx context.Context, tx pgx.Tx, id uuid.UUID) (string, error) {
	var name *string
	err := tx.QueryRow(ctx, `SELECT s FROM unnest($2::text[]) WITH ORDINALITY AS p(s, i)
		WHERE NOT step_succeeded($1, s) ORDER BY i LIMIT 1`, id, wire.Pipeline).Scan(&name)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("find the step %s waits for: %w", id, err)
	}
	if name == nil {
		return "", nil
	}
	return *name, nil
}

// failTask marks task failed with reason and stages event.task.failed in
// the outbox, inside tx; it returns the outbox id (0 when nothing changed).
func failTask(ctx context.Context, tx pgx.Tx, id uuid.UUID, trace, stepName, reason string) (int64, error) {
	res, err := task.Apply(ctx, tx, task.Fail(task.Ref{ID: id, Step: stepName, Trace: trace}, "", reason))
	if err != nil {
		return 0, fmt.Errorf("fail task %s: %w", id, err)
	}
	return res.EventID, nil
}

// cut shortens s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
