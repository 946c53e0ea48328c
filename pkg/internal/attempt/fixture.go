package attempt

import "github.com/google/uuid"

// RecordSucceeded records each step of steps of task as succeeded once
// (attempt 1, the step's only part), run by by: the history of a task that
// finished, for the fixtures that make one (pkg/task/tasktest). Its SQL
// returns one row, the number of attempts recorded.
func RecordSucceeded(task uuid.UUID, steps []string, by string) Statement {
	return Statement{Name: "record succeeded steps",
		SQL: `WITH s AS (INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at)
		SELECT $1, step, '', 1, 'succeeded', $3, now(), now() FROM unnest($2::text[]) AS step RETURNING 1)
		SELECT count(*) FROM s`,
		Args: []any{task, steps, by}}
}
