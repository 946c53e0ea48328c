package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
)

// TestTaskMetricsInRealtimeTimelineAndHealth: seed 003's task metrics of a
// done task (first output at its first tts part's success, completed at
// its mux_video's) are in its realtime status and its timeline, and the
// health report averages them per project (first-output delay, completion
// time, queue wait per part), a failed task counted as ended, not completed.
func TestTaskMetricsInRealtimeTimelineAndHealth(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	done := f.insertTask(t, "done", t0)
	f.addAttempt(t, done, "extract_audio", "", 1, "succeeded", t0.Add(time.Second), time.Second)
	f.addAttempt(t, done, "tts", "p1", 1, "succeeded", t0.Add(10*time.Second), 10*time.Second)
	f.addAttempt(t, done, "tts", "p2", 1, "succeeded", t0.Add(10*time.Second), 15*time.Second)
	f.addAttempt(t, done, "mux_video", "", 1, "succeeded", t0.Add(30*time.Second), 10*time.Second)
	failed := f.insertTask(t, "failed", t0)
	f.addAttempt(t, failed, "extract_audio", "", 1, "failed", t0.Add(time.Second), time.Second)
	if _, err := f.pool.Exec(ctx, `UPDATE tasks SET project = 'acme', updated_at = $3 WHERE id IN ($1, $2)`,
		done, failed, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Waits: 1 s and 3 s for the done task's tts parts, 4 s for the failed
	// task's extract_audio.
	if _, err := f.pool.Exec(ctx, `UPDATE task_steps SET queue_wait_ms = CASE part WHEN 'p1' THEN 1000 WHEN 'p2' THEN 3000 ELSE 4000 END
		WHERE (task_id = $1 AND step = 'tts') OR task_id = $2`, done, failed); err != nil {
		t.Fatal(err)
	}

	var rs realtimeStatus
	f.doJSON(t, "GET", "/api/tasks/"+done.String()+"/realtime-status", nil, http.StatusOK, &rs)
	tm := rs.TaskMetrics
	if tm.FirstOutputAt == nil || !tm.FirstOutputAt.Equal(t0.Add(20*time.Second)) || tm.FirstOutputDelay == nil || *tm.FirstOutputDelay != 20 {
		t.Errorf("first output %v after %v, want at t0+20s, 20 s", tm.FirstOutputAt, tm.FirstOutputDelay)
	}
	if tm.CompletedAt == nil || tm.CompletionTime == nil || *tm.CompletionTime != 40 {
		t.Errorf("completed %v after %v, want at the mux_video success, 40 s (not the row's later updated_at)", tm.CompletedAt, tm.CompletionTime)
	}
	if tm.PartsDone != tm.PartsTotal || tm.AvgPartWait == nil || *tm.AvgPartWait != 2 || rs.Metrics.AvgWaitTime != 2 {
		t.Errorf("task metrics %+v, metrics %+v: want every part done and a wait of 2 s per part", tm, rs.Metrics)
	}

	var tl struct{ Events []view.Event }
	f.doJSON(t, "GET", "/api/tasks/"+done.String()+"/timeline", nil, http.StatusOK, &tl)
	found := false
	for _, e := range tl.Events {
		if e.Kind == view.EventFirstOutput {
			found = e.At.Equal(t0.Add(20*time.Second)) && e.Detail == "20.000 s after submission"
		}
	}
	if !found {
		t.Errorf("timeline has no first_output event at t0+20s: %+v", tl.Events)
	}

	var h healthReport
	f.doJSON(t, "GET", "/api/system/health", nil, http.StatusOK, &h)
	if len(h.Projects) != 1 {
		t.Fatalf("health projects %+v, want acme alone", h.Projects)
	}
	p := h.Projects[0]
	if p.Project != "acme" || p.Tasks != 2 || p.Completed != 1 || p.Ended != 2 || p.AvgFirstOutputDelay == nil ||
		*p.AvgFirstOutputDelay != 20 || p.AvgCompletionTime == nil || *p.AvgCompletionTime != 40 || p.AvgWait == nil ||
		*p.AvgWait < 2.666 || *p.AvgWait > 2.667 {
		t.Errorf("acme %+v (wait %v): want 2 tasks, 1 completed, 2 ended, first output 20 s, completion 40 s, wait 8/3 s per part",
			p, deref(p.AvgWait))
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
