package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/task/tasktest"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

func TestRedubChangesOneLineOfADoneTask(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := tasktest.Done(t, ctx, f.pool, "trace-redub")
	if _, err := f.pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key)
		VALUES ($1, 0, 0, 900, 'hello', 'hola', $2)`, id, wire.SegmentKey(id, 0)); err != nil {
		t.Fatal(err)
	}
	path := "/api/tasks/" + id.String() + "/redub"
	f.doJSON(t, "POST", path, map[string]any{"segment": 2, "text": "x"}, http.StatusBadRequest, nil)
	f.doJSON(t, "POST", "/api/tasks/"+uuid.NewString()+"/redub", map[string]any{"segment": 1, "text": "x"}, http.StatusNotFound, nil)
	// The text rule (dub.CheckText): no override, no escape, no line break
	// that would start a subtitle cue of its own.
	for _, text := range []string{"ho\u202ela", "\x1b[2Jhola", "hola\n\n2\n00:00:00,000 --> 00:00:09,000\nfalse"} {
		f.doJSON(t, "POST", path, map[string]any{"segment": 1, "text": text}, http.StatusBadRequest, nil)
	}

	var r dub.Redubbed
	f.doJSON(t, "POST", path, map[string]any{"segment": 1, "text": "buenas"}, http.StatusAccepted, &r)
	if r.TaskID != id || r.Version != 2 || r.N != 1 || r.Text != "buenas" || r.PreviousText == nil || *r.PreviousText != "hola" {
		t.Fatalf("redub answered %+v", r)
	}
	env, err := wire.Decode(f.next(t, "task.tts").Body)
	if err != nil || env.TaskID != id {
		t.Fatalf("tts message %+v %v", env, err)
	}
	var status, text string
	if err := f.pool.QueryRow(ctx, `SELECT t.status, s.mt_text FROM tasks t JOIN segments s ON s.task_id = t.id
		WHERE t.id = $1`, id).Scan(&status, &text); err != nil {
		t.Fatal(err)
	}
	if status != "running" || text != "buenas" {
		t.Fatalf("after redub: status %s, text %q", status, text)
	}
	// The task is being re-dubbed: a second redub is refused until it is done.
	f.doJSON(t, "POST", path, map[string]any{"segment": 1, "text": "otra"}, http.StatusConflict, nil)
}

func TestSegmentsListTheLinesRedubTakes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := tasktest.Done(t, ctx, f.pool, "trace-segments")
	// Pipeline indexes 2 and 5: the API numbers them 1 and 2.
	if _, err := f.pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text,
		tts_audio_key, tts_params_json, speaker, voice, tts_error) VALUES
		($1, 2, 1000, 2500, 'hello there', 'hola', $2, '{"slot_ms": 1500, "speed": 1.1}', 'S1', 'es-f1', ''),
		($1, 5, 3000, 4200, 'bye', NULL, NULL, NULL, '', '', 'engine down')`, id, wire.SegmentKey(id, 2)); err != nil {
		t.Fatal(err)
	}
	path := "/api/tasks/" + id.String() + "/segments"
	var got segmentList
	decode(t, f.do(t, "GET", path, readToken, "", nil), http.StatusOK, &got)
	if got.TaskID != id || len(got.Segments) != 2 {
		t.Fatalf("segments %+v", got)
	}
	a, b := got.Segments[0], got.Segments[1]
	if a.N != 1 || a.StartMS != 1000 || a.EndMS != 2500 || a.Speaker != "S1" || a.Voice != "es-f1" ||
		a.SourceText != "hello there" || a.Text == nil || *a.Text != "hola" || !a.Synthesized ||
		!strings.Contains(string(a.Fit), `"slot_ms":1500`) {
		t.Fatalf("first segment %+v (fit %s)", a, a.Fit)
	}
	if b.N != 2 || b.Text != nil || b.Synthesized || (b.Fit != nil && string(b.Fit) != "null") || b.Error != "engine down" {
		t.Fatalf("second segment %+v", b)
	}
	decode(t, f.do(t, "GET", "/api/tasks/"+uuid.NewString()+"/segments", readToken, "", nil), http.StatusNotFound, nil)
	decode(t, f.do(t, "GET", "/api/tasks/nope/segments", readToken, "", nil), http.StatusBadRequest, nil)

	// The number the list shows is the one redub takes.
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/redub", map[string]any{"segment": 2, "text": "adiós"}, http.StatusAccepted, nil)
	decode(t, f.do(t, "GET", path, readToken, "", nil), http.StatusOK, &got)
	if t2 := got.Segments[1].Text; t2 == nil || *t2 != "adiós" || got.Segments[0].Text == nil || *got.Segments[0].Text != "hola" {
		t.Fatalf("after redub of segment 2: %+v", got.Segments)
	}
}
