package main

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

// A paused step's parts wait: with no message anywhere for them and no
// activity for far longer than STUCK_TASK_SECONDS (the lost-message check)
// or RECONCILE_TASK_MAX_IDLE_SECONDS (the overdue check), nothing is
// suspected, re-driven or failed while the step is paused. Once resumed,
// the same lost message is suspected, then re-driven, as before.
func TestPausedStepIsWaitingNotLost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := f.task(t, 2*24*time.Hour)
	f.succeeded(t, id, wire.StepExtractAudio)
	f.emit(t, asrOf(t, id), 2*24*time.Hour)
	if _, err := worker.SetPaused(ctx, f.pool, wire.StepASR, true, "test"); err != nil {
		t.Fatal(err)
	}

	rec := f.reconciler()
	acts := passes(t, rec, 3)
	if n := count(acts, actionSuspect) + count(acts, actionStuck) + count(acts, actionFailed); n != 0 {
		t.Fatalf("a paused step's part was suspected, re-driven or failed: %+v", acts)
	}
	if n := count(acts, actionWaiting); n != 3 {
		t.Fatalf("%d waiting parts counted in 3 passes, want 3: %+v", n, acts)
	}
	var status string
	if err := f.pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&status); err != nil || status != "running" {
		t.Fatalf("task is %s (%v), want still running", status, err)
	}

	if _, err := worker.SetPaused(ctx, f.pool, wire.StepASR, false, "test"); err != nil {
		t.Fatal(err)
	}
	// The pause kept the task waiting: its idle clock starts again at the
	// resume, so it is not overdue right after it...
	acts, err := rec.overdueTasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(acts, actionFailed); n != 0 {
		t.Fatalf("failed as overdue right after the resume (the pause counted as idle): %+v", acts)
	}
	// ...but it is once RECONCILE_TASK_MAX_IDLE_SECONDS passed since the resume.
	at(t, f, rec, rec.set.TaskMaxIdle+time.Minute)
	if acts, err = rec.overdueTasks(ctx); err != nil {
		t.Fatal(err)
	}
	if count(acts, actionFailed) != 1 {
		t.Fatalf("idle for longer than the bound since the resume: %+v, want the task failed as overdue", acts)
	}
}
