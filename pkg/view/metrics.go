package view

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TaskMetrics are seed 003's task_processing_metrics of one task, read
// from the task_metrics view: when it was submitted, when its first
// dubbed segments were ready (its first tts part succeeded), when it
// completed (done), and the mean queue wait of its parts.
type TaskMetrics struct {
	// SubmittedAt is when the task was submitted (a child task: its
	// parent's submission).
	SubmittedAt time.Time `json:"submittedAt"`
	// FirstOutputAt is when its first dubbed segments were stored (the
	// first tts part that succeeded); null before, and for a parent task
	// (its children dub).
	FirstOutputAt *time.Time `json:"firstOutputAt"`
	// CompletedAt is when the task was done; null until then, and for a
	// task that failed or was cancelled.
	CompletedAt *time.Time `json:"completedAt"`
	// FirstOutputDelay and CompletionTime are seconds from SubmittedAt to
	// FirstOutputAt and CompletedAt (seed 003's first_email_delay and
	// task_completion_time).
	FirstOutputDelay *float64 `json:"firstOutputDelay"`
	CompletionTime   *float64 `json:"completionTime"`
	// AvgPartWait is the mean over the task's parts of the time each part's
	// messages waited in their work queues (its attempts' queue waits
	// summed), seconds; null when no part's wait was measured.
	AvgPartWait *float64 `json:"avgPartWait"`
	// WaitedParts counts the parts AvgPartWait is the mean of.
	WaitedParts int `json:"waitedParts"`
}

// taskMetricsSQL reads one task's row of task_metrics.
const taskMetricsSQL = `SELECT submitted_at, first_output_at, completed_at, part_wait_seconds, waited_parts
	FROM task_metrics WHERE task_id = $1`

// LoadTaskMetrics reads the task metrics of task id (ErrNotFound when
// there is no such task).
func LoadTaskMetrics(ctx context.Context, db Querier, id uuid.UUID) (TaskMetrics, error) {
	var m TaskMetrics
	err := db.QueryRow(ctx, taskMetricsSQL, id).Scan(&m.SubmittedAt, &m.FirstOutputAt, &m.CompletedAt, &m.AvgPartWait, &m.WaitedParts)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, ErrNotFound
	}
	if err != nil {
		return m, fmt.Errorf("read task metrics of %s: %w", id, err)
	}
	m.FirstOutputDelay = secondsBetween(m.SubmittedAt, m.FirstOutputAt)
	m.CompletionTime = secondsBetween(m.SubmittedAt, m.CompletedAt)
	return m, nil
}

// secondsBetween is the seconds from a to b, nil when b is.
func secondsBetween(a time.Time, b *time.Time) *float64 {
	if b == nil {
		return nil
	}
	s := b.Sub(a).Seconds()
	return &s
}

// ProjectMetrics are the averages of seed 003's task metrics over a
// project's tasks (parents of several languages left out: their children
// are counted).
type ProjectMetrics struct {
	// Project is the tasks' project ("" for tasks without one).
	Project string `json:"project"`
	// Tasks counts the project's tasks created in the window; Completed
	// those done, Ended those done, failed or cancelled.
	Tasks     int `json:"tasks"`
	Completed int `json:"completed"`
	Ended     int `json:"ended"`
	// AvgWait is the mean queue wait of a part (seconds, over every part
	// of the tasks with a measured wait); AvgFirstOutputDelay and
	// AvgCompletionTime the means over the tasks that have one. Null when
	// none has.
	AvgWait             *float64 `json:"avgWait"`
	AvgFirstOutputDelay *float64 `json:"avgFirstOutputDelay"`
	AvgCompletionTime   *float64 `json:"avgCompletionTime"`
}

// projectMetricsSQL averages task_metrics per project over the tasks
// created since $1.
const projectMetricsSQL = `SELECT project, count(*)::int, count(completed_at)::int,
	count(*) FILTER (WHERE status IN ('done', 'failed', 'cancelled'))::int,
	sum(part_wait_seconds * waited_parts) / nullif(sum(waited_parts), 0),
	avg(extract(epoch FROM first_output_at - submitted_at))::float8,
	avg(extract(epoch FROM completed_at - submitted_at))::float8
	FROM task_metrics WHERE created_at > $1 AND NOT is_parent
	GROUP BY project ORDER BY count(*) DESC, project LIMIT $2`

// ProjectAverages averages the task metrics per project over the tasks
// created since since, the limit projects with the most tasks first.
func ProjectAverages(ctx context.Context, db Querier, since time.Time, limit int) ([]ProjectMetrics, error) {
	rows, err := db.Query(ctx, projectMetricsSQL, since, limit)
	if err != nil {
		return nil, fmt.Errorf("read project metrics: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProjectMetrics, error) {
		var p ProjectMetrics
		err := r.Scan(&p.Project, &p.Tasks, &p.Completed, &p.Ended, &p.AvgWait, &p.AvgFirstOutputDelay, &p.AvgCompletionTime)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read project metrics: %w", err)
	}
	if out == nil {
		out = []ProjectMetrics{}
	}
	return out, nil
}
