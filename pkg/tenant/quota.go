package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Usage is what a project took of the shared engines on a day.
type Usage struct {
	Project string `json:"project"`
	// Day is the UTC day, YYYY-MM-DD.
	Day           string  `json:"day"`
	SharedMinutes float64 `json:"sharedMinutes"`
	// LimitMinutes is the project's daily limit (null: none).
	LimitMinutes *int `json:"limitMinutes"`
}

// nextDay is the start of the UTC day after now's: when the daily
// minutes start again.
func nextDay(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// ChargeShared charges task id's seconds of video to its project's use of
// the shared engines today (UTC, as of now), once per task: a task charged
// already (a redelivered or replayed step) goes on. Past the project's
// daily limit it charges nothing and answers fault.Wait with reason
// fault.WaitProjectQuota until the next day: the step runtime parks the
// step (it is not failed, and such waits are not bounded) and offers it
// again then. A task without a project row (an old task, a test's), or of
// a project that uses its own engines only, is not charged. The project's row is locked for the charge, so that two tasks
// never both take the last minutes (SQL charge_shared: one round trip).
func ChargeShared(ctx context.Context, q store.Querier, id uuid.UUID, seconds float64, now time.Time) error {
	var verdict string
	var project *string
	var limit *int32
	var used *float64
	day := now.UTC().Format(time.DateOnly)
	if err := q.QueryRow(ctx, `SELECT verdict, project, limit_minutes, used_seconds FROM charge_shared($1, $2, $3)`,
		id, seconds, day).Scan(&verdict, &project, &limit, &used); err != nil {
		return fmt.Errorf("charge shared minutes of %s: %w", id, err)
	}
	if verdict != "over" {
		return nil
	}
	if project == nil || limit == nil || used == nil {
		return fmt.Errorf("charge shared minutes of %s: verdict over without project, limit and use", id)
	}
	return fault.Wait(fmt.Errorf("project %s: %.1f of its %d minutes a day on the shared engines used, this task needs %.1f more",
		*project, *used/60, *limit, seconds/60), fault.WaitProjectQuota, nextDay(now))
}

// UsageOf returns what project used of the shared engines on now's UTC day.
func UsageOf(ctx context.Context, q store.Querier, project string, now time.Time) (Usage, error) {
	u := Usage{Project: project, Day: now.UTC().Format(time.DateOnly)}
	var limit *int32
	err := q.QueryRow(ctx, `SELECT p.daily_shared_minutes,
		coalesce((SELECT shared_seconds FROM project_usage WHERE project = p.id AND day = $2), 0) / 60
		FROM projects p WHERE p.id = $1`, project, u.Day).Scan(&limit, &u.SharedMinutes)
	if errors.Is(err, pgx.ErrNoRows) {
		return u, fmt.Errorf("%w: project %s", ErrNotFound, cut(project))
	}
	if err != nil {
		return u, fmt.Errorf("usage of project %s: %w", cut(project), err)
	}
	if limit != nil {
		l := int(*limit)
		u.LimitMinutes = &l
	}
	return u, nil
}

// EngineScope returns the project of task id and whether its tasks may
// use the shared engines (the engines' pool.ForProject): a task without a project row
// uses the shared engines, as before projects.
func EngineScope(ctx context.Context, q store.Querier, id uuid.UUID) (project string, shared bool, err error) {
	err = q.QueryRow(ctx, `SELECT t.project, coalesce(p.shared_engines, true)
		FROM tasks t LEFT JOIN projects p ON p.id = t.project WHERE t.id = $1`, id).Scan(&project, &shared)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", true, nil
	}
	if err != nil {
		return "", true, fmt.Errorf("read the project of task %s: %w", id, err)
	}
	return project, shared, nil
}

// Crowded reports whether task id belongs to a project that takes its
// turns as a project (fair_scope project) and has more than over tasks
// queued or running: its bulk work may yield the CPU to other projects'
// (speech.Yielding), as a long recording's chunks yield to short tasks.
func Crowded(ctx context.Context, q store.Querier, id uuid.UUID, over int) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `WITH s AS (SELECT window_scope($1) AS project)
		SELECT count(*) FROM tasks t, s WHERE s.project <> '' AND t.project = s.project
		AND t.status IN ('queued', 'running')`, id).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("count the tasks of the project of %s: %w", id, err)
	}
	return n > over, nil
}
