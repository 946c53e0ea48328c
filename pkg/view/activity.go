package view

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// This file is what the console's live views read: the tasks and the step
// attempts that changed since a moment (its event stream), and the load on
// the steps (its health page).

// TaskChange is a task's state as the event stream sends it.
type TaskChange struct {
	TaskID    uuid.UUID `json:"taskId"`
	Status    string    `json:"status"`
	Error     string    `json:"error"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Project is the task's project: a project's stream carries its own.
	Project string `json:"project"`
}

// TaskChanges reads the unfinished tasks, those waiting in review among
// them (the limit most recently updated), and those finished after since
// (both through tasks_status_updated_idx), task only unless it is
// uuid.Nil.
func TaskChanges(ctx context.Context, db Querier, only uuid.UUID, since time.Time, limit int) ([]TaskChange, error) {
	var one *uuid.UUID
	if only != uuid.Nil {
		one = &only
	}
	rows, err := db.Query(ctx, `(SELECT id, status, error, updated_at, project FROM tasks
		  WHERE status IN ('queued', 'running', 'compensating', 'review') AND ($3::uuid IS NULL OR id = $3)
		  ORDER BY updated_at DESC LIMIT $1)
		UNION ALL
		(SELECT id, status, error, updated_at, project FROM tasks
		  WHERE status IN ('done', 'failed', 'cancelled') AND updated_at > $2
		  AND ($3::uuid IS NULL OR id = $3))`, limit, since, one)
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TaskChange, error) {
		var t TaskChange
		return t, r.Scan(&t.TaskID, &t.Status, &t.Error, &t.UpdatedAt, &t.Project)
	})
}

// StepAttempt is one attempt of one part of a task's step, as the event
// stream sends it.
type StepAttempt struct {
	TaskID     uuid.UUID  `json:"taskId"`
	Step       string     `json:"step"`
	Part       string     `json:"part"`
	Attempt    int        `json:"attempt"`
	Status     string     `json:"status"`
	Worker     string     `json:"worker"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	Error      string     `json:"error"`
}

// StepAttempts reads, by their id, the attempts of the tasks that started
// or finished after since, and with running those running now.
func StepAttempts(ctx context.Context, db Querier, tasks []uuid.UUID, since time.Time, running bool) (map[int64]StepAttempt, error) {
	rows, err := attempt.Rows(ctx, db, tasks, since, running)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]StepAttempt, len(rows))
	for _, r := range rows {
		out[r.ID] = StepAttempt{TaskID: r.TaskID, Step: r.Step, Part: r.Part, Attempt: r.Attempt, Status: r.Status,
			Worker: r.Worker, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Error: r.Error}
	}
	return out, nil
}

// StepLoadStats is the attempts' load on the steps: running now (per step) and the
// window's finished and failed attempts with their mean duration.
type StepLoadStats = attempt.Load

// StepLoad reads the load on steps: the attempts running now with a live
// lease, and those started within the last window.
func StepLoad(ctx context.Context, db Querier, steps []string, window time.Duration) (StepLoadStats, error) {
	return attempt.ReadLoad(ctx, db, steps, window)
}

// ActivitySQL is the query of the attempts of the steps (an SQL text[]) at
// the instant at (an SQL timestamptz) that the console's metric history
// samples: rows (series, key, value) of step_attempts, error_rate,
// step_duration_p50 and step_duration_p95 per step (attempt.ActivitySQL).
func ActivitySQL(at, steps string) string { return attempt.ActivitySQL(at, steps) }
