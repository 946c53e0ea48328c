package view

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Compensation is a task waiting for its missing speech (compensating).
type Compensation struct {
	TaskID          uuid.UUID `json:"taskId"`
	Status          string    `json:"status"`
	MissingSegments []int     `json:"missingSegments"`
	UpdatedAt       time.Time `json:"updatedAt"`
	LastError       string    `json:"lastError"`
}

// Compensations returns up to limit compensating tasks, oldest first, with
// the segments that still lack audio and the last synthesis error (the
// task's error without one).
func Compensations(ctx context.Context, db Querier, limit int) ([]Compensation, error) {
	return CompensationsOf(ctx, db, limit, "")
}

// CompensationsOf is Compensations of project's tasks ("": of every
// project).
func CompensationsOf(ctx context.Context, db Querier, limit int, project string) ([]Compensation, error) {
	rows, err := db.Query(ctx, `SELECT t.id, t.status, t.updated_at, `+task.MissingAudioSQL+`,
		coalesce((SELECT s.tts_error FROM segments s WHERE s.task_id = t.id AND s.tts_error <> ''
		          ORDER BY s.tts_failed_at DESC NULLS LAST LIMIT 1), t.error)
		FROM tasks t WHERE t.status = 'compensating' AND ($2 = '' OR t.project = $2)
		ORDER BY t.updated_at, t.id LIMIT $1`, limit, project)
	if err != nil {
		return nil, fmt.Errorf("list compensations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Compensation, error) {
		var c Compensation
		var missing []int32
		err := row.Scan(&c.TaskID, &c.Status, &c.UpdatedAt, &missing, &c.LastError)
		c.MissingSegments = make([]int, 0, len(missing))
		for _, m := range missing {
			c.MissingSegments = append(c.MissingSegments, int(m))
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list compensations: %w", err)
	}
	if out == nil {
		out = []Compensation{}
	}
	return out, nil
}
