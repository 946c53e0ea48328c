package tasks

import (
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
)

// TestRealtimeCountsNoWorkForASkippedStep: a step the task's plan skips
// (a task from subtitles: asr) is no unit of work, done or pending: the
// progress of a task whose other steps all succeeded is complete, and the
// estimate does not wait for it.
func TestRealtimeCountsNoWorkForASkippedStep(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ok := func(step string) view.Step {
		return view.Step{Step: step, Status: "succeeded", Parts: []view.Part{{Status: "succeeded",
			Attempts: []view.Attempt{{Status: "succeeded", StartedAt: now.Add(-time.Second)}}}}}
	}
	d := &view.Task{Summary: view.Summary{Status: "running", CreatedAt: now.Add(-time.Minute), UpdatedAt: now},
		Steps: []view.Step{ok("extract_audio"), {Step: "asr", Status: view.Skipped, Parts: []view.Part{}}, ok("translate"),
			{Step: "tts", Status: "pending", Parts: []view.Part{}}, {Step: "mux_video", Status: "pending", Parts: []view.Part{}}}}
	rs := computeRealtime(d, now)
	if rs.Progress.Total != 4 || rs.Progress.Done != 2 || rs.Progress.Pending != 2 {
		t.Fatalf("progress %+v: want 4 units, 2 done, 2 pending (asr skipped)", rs.Progress)
	}
}
