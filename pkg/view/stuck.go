package view

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// stuckShown bounds the stuck tasks named in a Stuck.
const stuckShown = 10

// Stuck is seed 003's stuck-task alert: the queued or running tasks with
// no progress for the threshold (their row unchanged, no attempt started
// or finished, none holding a live lease or waiting for an engine).
type Stuck struct {
	// ThresholdSeconds is the threshold (monitoring.stuck_task_threshold).
	ThresholdSeconds int `json:"thresholdSeconds"`
	// Count is how many tasks are stuck; TaskIDs names the longest stuck
	// (at most ten), Oldest is when the longest stuck last moved.
	Count   int         `json:"count"`
	TaskIDs []uuid.UUID `json:"taskIds"`
	Oldest  *time.Time  `json:"oldest"`
}

// StuckTasks reads the tasks stuck for threshold.
func StuckTasks(ctx context.Context, q attempt.Reader, threshold time.Duration) (Stuck, error) {
	out := Stuck{ThresholdSeconds: int(threshold / time.Second), TaskIDs: []uuid.UUID{}}
	rows, err := q.Query(ctx, `SELECT t.id, t.updated_at, count(*) OVER () FROM tasks t
		WHERE t.status IN ('queued', 'running') AND t.updated_at < now() - $1::interval
		  AND `+attempt.QuietSQL("t.id", "$1::interval")+`
		ORDER BY t.updated_at LIMIT $2`, threshold, stuckShown)
	if err != nil {
		return out, fmt.Errorf("read stuck tasks: %w", err)
	}
	var id uuid.UUID
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &at, &out.Count}, func() error {
		if out.Oldest == nil {
			t := at.UTC()
			out.Oldest = &t
		}
		out.TaskIDs = append(out.TaskIDs, id)
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("read stuck tasks: %w", err)
	}
	return out, nil
}
