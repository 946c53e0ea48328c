package view_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/task/tasktest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

func setup(t *testing.T) (context.Context, *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, testenv.Postgres(t).Pool
}

func exec(t *testing.T, ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// insertTask adds a task row of one language.
func insertTask(t *testing.T, ctx context.Context, pool *pgxpool.Pool, status string, at time.Time) uuid.UUID {
	t.Helper()
	id := uuid.New()
	exec(t, ctx, pool, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key,
		output_video_key, created_at, updated_at) VALUES ($1, $2, 'en', 'es', $3, $4, $5, $5)`,
		id, status, wire.DefaultKeys(id).SourceVideo, wire.DefaultKeys(id).OutputVideo, at)
	return id
}

// A task with a retried step and a step fanned out into parts: each step's
// status by the runtime's rules, its parts with their attempts, the segment
// counts and the dead letters.
func TestLoadSumsUpStepsPartsAndAttempts(t *testing.T) {
	t.Parallel()
	ctx, pool := setup(t)
	id := insertTask(t, ctx, pool, "running", time.Now().Add(-time.Minute))
	exec(t, ctx, pool, `INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at, error) VALUES
		($1, 'extract_audio', '', 1, 'failed', 'w1', now() - interval '10 s', now() - interval '9 s', 'download: timeout'),
		($1, 'extract_audio', '', 2, 'succeeded', 'w1', now() - interval '8 s', now() - interval '7 s', ''),
		($1, 'asr', '', 1, 'succeeded', 'w2', now() - interval '7 s', now() - interval '5 s', ''),
		($1, 'translate', 'seg-0', 1, 'succeeded', 'w3', now() - interval '5 s', now() - interval '4 s', ''),
		($1, 'translate', 'seg-2', 1, 'parked', 'w3', now() - interval '4 s', now() - interval '3 s', 'rate limited')`, id)
	exec(t, ctx, pool, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', 'seg-0'),
		($1, 'translate', 'seg-2'), ($1, 'translate', 'seg-4')`, id)
	exec(t, ctx, pool, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key, tts_failures) VALUES
		($1, 0, 0, 1000, 'hello', 'hola', 'tts/x/seg-000000.wav', 0), ($1, 2, 1000, 2000, 'world', 'mundo', NULL, 2),
		($1, 4, 2000, 3000, 'again', NULL, NULL, 0)`, id)
	exec(t, ctx, pool, `INSERT INTO dead_letters (message_id, task_id, step, attempt, failure_reason) VALUES ('m1', $1, 'translate', 4, 'boom')`, id)

	v, err := view.Load(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status          string
		attempts, parts int
	}{"extract_audio": {"succeeded", 2, 1}, "asr": {"succeeded", 1, 1}, "translate": {"parked", 2, 3},
		"tts": {"pending", 0, 0}, "mux_video": {"pending", 0, 0}}
	if len(v.Steps) != len(wire.Pipeline) {
		t.Fatalf("steps %+v", v.Steps)
	}
	for _, s := range v.Steps {
		if w := want[s.Step]; s.Status != w.status || s.Attempts != w.attempts || len(s.Parts) != w.parts {
			t.Errorf("step %s: %s, %d attempts, %d parts; want %+v", s.Step, s.Status, s.Attempts, len(s.Parts), w)
		}
	}
	ea := v.Steps[0].Parts[0]
	if len(ea.Attempts) != 2 || ea.Attempts[0].Error != "download: timeout" || *ea.Attempts[0].DurationMS != 1000 ||
		v.Steps[0].DurationMS == nil || *v.Steps[0].DurationMS != 3000 {
		t.Errorf("extract_audio: %+v (step %+v)", ea, v.Steps[0])
	}
	tr := v.Steps[2]
	if got := []string{tr.Parts[0].Status, tr.Parts[1].Status, tr.Parts[2].Status}; !slices.Equal(got, []string{"succeeded", "parked", "pending"}) ||
		tr.FinishedAt != nil {
		t.Errorf("translate parts %v, finished %v", got, tr.FinishedAt)
	}
	if v.Segments != (view.SegmentCounts{Total: 3, Translated: 2, Synthesized: 1, FailedTTS: 1}) {
		t.Errorf("segments %+v", v.Segments)
	}
	if len(v.DeadLetters) != 1 || v.DeadLetters[0].FailureReason != "boom" || v.Languages != nil ||
		v.OutputVideoKey != wire.DefaultKeys(id).OutputVideo {
		t.Errorf("dead letters %+v, languages %+v, output %q", v.DeadLetters, v.Languages, v.OutputVideoKey)
	}
	if _, err := view.Load(ctx, pool, uuid.New()); !errors.Is(err, view.ErrNotFound) {
		t.Errorf("load of a missing task: %v", err)
	}
}

// A parent lists its children with their results and no output of its own,
// and only the steps it runs; a child names its parent.
func TestLoadAParentWithItsChildren(t *testing.T) {
	t.Parallel()
	ctx, pool := setup(t)
	parent := uuid.New()
	exec(t, ctx, pool, `INSERT INTO tasks (id, status, source_language, target_language, targets, source_video_key,
		output_video_key) VALUES ($1, 'done', 'en', 'es', '{es,ca}', $2, $3)`, parent, wire.DefaultKeys(parent).SourceVideo,
		wire.DefaultKeys(parent).OutputVideo)
	es, ca := wire.ChildTaskID(parent, "es"), wire.ChildTaskID(parent, "ca")
	for _, c := range []struct {
		id           uuid.UUID
		lang, result string
	}{{es, "es", `{"output_video_key": "outputs/x/final.mp4", "subtitles": {"bilingual": "outputs/x/final.es-en.srt"}}`},
		{ca, "ca", `{"output_video_key": "outputs/y/final.mp4"}`}} {
		exec(t, ctx, pool, `INSERT INTO tasks (id, status, source_language, target_language, parent_task_id,
			source_video_key, output_video_key, result) VALUES ($1, 'done', 'en', $2, $3, $4, $5, $6)`,
			c.id, c.lang, parent, wire.DefaultKeys(c.id).SourceVideo, wire.DefaultKeys(c.id).OutputVideo, c.result)
	}
	for _, step := range []string{"extract_audio", "asr"} {
		exec(t, ctx, pool, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at) VALUES ($1, $2, 1, 'succeeded', now())`,
			parent, step)
	}
	v, err := view.Load(ctx, pool, parent)
	if err != nil {
		t.Fatal(err)
	}
	if !v.IsParent() || v.OutputVideoKey != "" || len(v.Steps) != 2 || v.StepsDone() != 2 || v.CurrentStep() != "" {
		t.Fatalf("parent: output %q, steps %+v", v.OutputVideoKey, v.Steps)
	}
	kids := v.ChildrenOf()
	if len(kids) != 2 || kids[0].TaskID != es || kids[1].TaskID != ca ||
		view.OutputOf(kids[0].Result).Subtitles["bilingual"] != "outputs/x/final.es-en.srt" {
		t.Fatalf("children %+v", kids)
	}
	c, err := view.Load(ctx, pool, es)
	if err != nil {
		t.Fatal(err)
	}
	if c.IsParent() || c.Languages == nil || c.Languages.ParentTaskID == nil || *c.Languages.ParentTaskID != parent ||
		len(c.Steps) != len(wire.Pipeline) || c.OutputVideoKey != wire.DefaultKeys(es).OutputVideo {
		t.Fatalf("child: %+v languages %+v", c.Summary, c.Languages)
	}
	// The list shows the parent, its children only when asked.
	page, err := view.List(ctx, pool, view.Filter{Limit: 10})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].TaskID != parent {
		t.Fatalf("list: %+v %v", page, err)
	}
	if page, err = view.List(ctx, pool, view.Filter{Limit: 10, WithChildren: true}); err != nil || len(page.Tasks) != 3 {
		t.Fatalf("list with children: %+v %v", page, err)
	}
}

// Segments and versions number a line from 1 alike: a re-dub of the third
// line (pipeline index 4) is the version of segment 3.
func TestVersionsNumberTheSegmentAsSegmentsDo(t *testing.T) {
	t.Parallel()
	ctx, pool := setup(t)
	id := tasktest.Done(t, ctx, pool, "trace-view")
	for i, text := range []string{"hola", "buenos días", "adiós"} {
		exec(t, ctx, pool, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key)
			VALUES ($1, $2, $3, $4, 'x', $5, $6)`, id, i*2, i*1000, i*1000+900, text, wire.SegmentKey(id, i*2))
	}
	segs, err := view.Segments(ctx, pool, id)
	if err != nil || len(segs) != 3 || segs[2].N != 3 || segs[2].Idx != 4 {
		t.Fatalf("segments %+v %v", segs, err)
	}
	if _, err := dub.Redub(ctx, pool, id, 3, "hasta luego"); err != nil {
		t.Fatal(err)
	}
	vs, err := view.Versions(ctx, pool, id)
	if err != nil || len(vs) != 2 || vs[0].Segment != nil || vs[1].Segment == nil || *vs[1].Segment != 3 ||
		*vs[1].Text != "hasta luego" || *vs[1].PreviousText != "adiós" {
		t.Fatalf("versions %+v %v", vs, err)
	}
}

// List pages newest first with a cursor, filters by status (cancelled
// among them) and refuses what is no filter.
func TestListPagesAndFilters(t *testing.T) {
	t.Parallel()
	ctx, pool := setup(t)
	base := time.Now().Add(-time.Hour)
	var want []uuid.UUID
	for i := range 5 {
		want = append([]uuid.UUID{insertTask(t, ctx, pool, "done", base.Add(time.Duration(i)*time.Minute))}, want...)
	}
	failed := insertTask(t, ctx, pool, "failed", base.Add(-time.Hour))
	var got []uuid.UUID
	f := view.Filter{Status: "done", Limit: 2}
	for {
		page, err := view.List(ctx, pool, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Tasks {
			got = append(got, s.TaskID)
		}
		if page.NextCursor == nil {
			break
		}
		f.Cursor = *page.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	if page, err := view.List(ctx, pool, view.Filter{Status: "failed", Limit: 5}); err != nil || len(page.Tasks) != 1 || page.Tasks[0].TaskID != failed {
		t.Fatalf("failed: %+v %v", page, err)
	}
	if page, err := view.List(ctx, pool, view.Filter{Status: view.Cancelled, Limit: 5}); err != nil || len(page.Tasks) != 0 {
		t.Fatalf("cancelled: %+v %v", page, err)
	}
	for _, bad := range []view.Filter{{Status: "finished", Limit: 5}, {Limit: 0}, {Limit: view.MaxPage + 1}, {Limit: 5, Cursor: "nope"}} {
		if _, err := view.List(ctx, pool, bad); !errors.Is(err, view.ErrBadFilter) {
			t.Errorf("list %+v: %v, want ErrBadFilter", bad, err)
		}
	}
}
