package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestProjectQuotaParksTheStep: a task of a project past its daily minutes
// on the shared engines waits at asr with reason project_quota until the
// next UTC day — not failed, whatever the bound on engine waits
// (STEP_MAX_WAITS=1, and the part has a wait already) — and, once the
// project may use the engines again, is transcribed and its minutes
// charged, once.
func TestProjectQuotaParksTheStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.NewStack(t, run, map[string]string{"TRANSLATE_BATCH_SIZE": "3", "STEP_MAX_WAITS": "1"})
	s.Start()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.DB.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO projects (id, daily_shared_minutes) VALUES ('tight', 0)`)
	env := newTask(s, filepath.Join(fixtures(t), "jfk.wav"))
	exec(`UPDATE tasks SET project = 'tight' WHERE id = $1`, env.TaskID)
	exec(`INSERT INTO task_steps (task_id, step, part, attempt, status, wait_reason, wait_until)
		VALUES ($1, 'asr', '', 1, 'failed', 'rate_limit', now())`, env.TaskID) // the bound is spent
	env = env.Retry()
	s.Publish(env)
	var reason, status string
	var until time.Time
	s.WaitFor("asr to wait", func() bool {
		err := s.DB.Pool.QueryRow(ctx, `SELECT coalesce(wait_reason, ''), wait_until, status FROM task_steps
			WHERE task_id = $1 AND step = 'asr' AND attempt = 2 AND status <> 'running'`, env.TaskID).Scan(&reason, &until, &status)
		return err == nil
	})
	y, m, d := time.Now().UTC().Date()
	if reason != "project_quota" || !until.Equal(time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("asr: %s, wait %q until %v, want project_quota until the next UTC day", status, reason, until)
	}
	if task := s.Task(env.TaskID); task.Status != "running" {
		t.Fatalf("task %s, want running (parked, never failed): %s", task.Status, task.Error)
	}
	// The project may use the engines again (a new day, or a raised
	// limit): the next offer runs.
	exec(`UPDATE projects SET daily_shared_minutes = 1 WHERE id = 'tight'`)
	s.Publish(env.Retry())
	s.WaitFor("asr's next attempt to end", func() bool {
		err := s.DB.Pool.QueryRow(ctx, `SELECT status FROM task_steps WHERE task_id = $1 AND step = 'asr'
			AND attempt = 3 AND status <> 'running'`, env.TaskID).Scan(&status)
		return err == nil
	})
	if status != "succeeded" {
		t.Fatalf("asr %s after the limit was raised: %+v", status, s.Task(env.TaskID))
	}
	var charged float64
	if err := s.DB.Pool.QueryRow(ctx, `SELECT shared_seconds FROM project_usage WHERE project = 'tight'`).Scan(&charged); err != nil || charged < 10 || charged > 12 {
		t.Errorf("charged %.1f s (%v), want the 11 s clip once", charged, err)
	}
}
