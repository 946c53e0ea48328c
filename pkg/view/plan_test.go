package view_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
)

// TestASkippedStepIsShownAsSkipped: a task from target-language subtitles
// skips asr and translate. The runtime counts them as done
// (step_succeeded), the read model shows them skipped — status skipped, no
// part, no attempt — the timeline says why, the plan is in the detail, and
// a version lists its burned video once ready.
func TestASkippedStepIsShownAsSkipped(t *testing.T) {
	t.Parallel()
	ctx, pool := setup(t)
	id := insertTask(t, ctx, pool, "done", time.Now().Add(-time.Minute))
	key := "subtitles/" + id.String() + "/subtitles.srt"
	sql, args := task.SavePlan(id, task.Plan{Skipped: []string{"asr", "translate"}, SubtitlesKey: key, SubtitlesLanguage: "es",
		BurnSubtitles: "target"})
	exec(t, ctx, pool, sql, args...)
	exec(t, ctx, pool, `INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at) VALUES
		($1, 'extract_audio', '', 1, 'succeeded', 'w1', now() - interval '9 s', now() - interval '8 s'),
		($1, 'tts', '', 1, 'succeeded', 'w2', now() - interval '7 s', now() - interval '6 s'),
		($1, 'mux_video', '', 1, 'succeeded', 'w3', now() - interval '5 s', now() - interval '4 s')`, id)
	for step, want := range map[string]bool{"asr": true, "translate": true, "tts": true} {
		if ok, err := view.StepSucceeded(ctx, pool, id, step); err != nil || ok != want {
			t.Errorf("step_succeeded(%s) = %v, %v", step, ok, err)
		}
	}
	d, err := view.Load(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, s := range d.Steps {
		statuses = append(statuses, s.Step+":"+s.Status)
		if s.Status == view.Skipped && (len(s.Parts) != 0 || s.Attempts != 0) {
			t.Errorf("skipped step %+v has parts or attempts", s)
		}
	}
	want := []string{"extract_audio:succeeded", "asr:skipped", "translate:skipped", "tts:succeeded", "mux_video:succeeded"}
	if !reflect.DeepEqual(statuses, want) || d.Plan == nil || d.Plan.SubtitlesKey != key || d.Plan.BurnSubtitles != "target" {
		t.Fatalf("steps %v, plan %+v", statuses, d.Plan)
	}
	events, err := view.Timeline(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, e := range events {
		if e.Kind == view.EventSkipped {
			skipped = append(skipped, e.Step+": "+e.Detail)
		}
	}
	if !reflect.DeepEqual(skipped, []string{"asr: the segments come from the subtitles given (es)",
		"translate: the subtitles are in the target language (es): spoken as they are"}) {
		t.Errorf("skipped events %v", skipped)
	}
	vs, err := view.Versions(ctx, pool, id)
	if err != nil || len(vs) != 1 || vs[0].BurnedVideoKey != "outputs/"+id.String()+"/final.burned.mp4" {
		t.Errorf("versions %+v, %v", vs, err)
	}
}
