package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/task/tasktest"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestSubmitWithReview: the upload's review field reaches the task's row and
// its first message; a stage that is none is refused with admit's text.
func TestSubmitWithReview(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ct, body := multipartBody(t, sampleVideo(t, "2"), map[string]string{"review": "transcript,translation"})
	var c created
	decode(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body), http.StatusCreated, &c)
	var review []string
	if err := f.pool.QueryRow(context.Background(), `SELECT review FROM tasks WHERE id = $1`, c.TaskID).Scan(&review); err != nil ||
		strings.Join(review, ",") != "transcript,translation" {
		t.Fatalf("task row's review %v (%v)", review, err)
	}
	env, err := wire.Decode(f.next(t, "task.extract_audio").Body)
	var p wire.ExtractAudio
	if err != nil || json.Unmarshal(env.Payload, &p) != nil || strings.Join(p.Review, ",") != "transcript,translation" {
		t.Fatalf("first message %+v (%v)", p, err)
	}
	ct, body = multipartBody(t, sampleVideo(t, "2"), map[string]string{"review": "voice"})
	resp := f.do(t, "POST", "/api/tasks", adminToken, ct, body)
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), `review \"voice\": want transcript, translation or both`) {
		t.Fatalf("review=voice: %d %s", resp.StatusCode, msg)
	}
}

// TestReviewThroughTheAPI: a task in review is read, a line edited (the
// audit entry keeps who, before and after), a line's source audio played,
// the lines approved (the translate message published); afterwards an
// edit is refused with 409.
func TestReviewThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := tasktest.InReview(t, ctx, f.pool, task.StageTranscript)
	if _, err := f.pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text) VALUES
		($1, 0, 0, 1000, 'hello there'), ($1, 1, 1500, 2000, 'good bye')`, id); err != nil {
		t.Fatal(err)
	}
	f.putRamp(t, wire.DefaultKeys(id).SourceAudio)
	base := "/api/tasks/" + id.String() + "/review"
	var rv view.TaskReview
	f.doJSON(t, "GET", base, nil, http.StatusOK, &rv)
	if rv.Status != task.Review || rv.Stage != task.StageTranscript || len(rv.Lines) != 2 || rv.WaitedSeconds == nil {
		t.Fatalf("review: %+v", rv)
	}
	var ed dub.Edited
	f.doJSON(t, "POST", base+"/edit", map[string]any{"line": 1, "source": "hello world"}, http.StatusOK, &ed)
	if ed.Lines[0].Source != "hello world" || ed.Edit.Actor != "admin" {
		t.Fatalf("edit answered %+v", ed)
	}
	f.doJSON(t, "POST", base+"/edit", map[string]any{"line": 2, "action": "split", "word": 5}, http.StatusBadRequest, nil)
	f.doJSON(t, "POST", base+"/edit", map[string]any{"line": 1, "endMs": 1600}, http.StatusBadRequest, nil)
	f.checkAudited(t, "review", id, `"before":[{"endMs":1000,"n":1,"source":"hello there"`)
	f.checkClip(t, base+"/audio?line=2", 500)
	f.doJSON(t, "GET", base+"/audio?line=3", nil, http.StatusBadRequest, nil)

	var a dub.Approved
	f.doJSON(t, "POST", base+"/approve", nil, http.StatusAccepted, &a)
	if a.Stage != task.StageTranscript || a.Lines != 2 || a.Batches != 1 {
		t.Fatalf("approve answered %+v", a)
	}
	env, err := wire.Decode(f.next(t, "task.translate").Body)
	var p wire.Translate
	if err != nil || env.TaskID != id || json.Unmarshal(env.Payload, &p) != nil || strings.Join(p.SegmentIDs, ",") != "seg-0,seg-1" {
		t.Fatalf("translate message %+v %v", p, err)
	}
	f.checkAudited(t, "approve", id, `"stage":"transcript"`)
	f.doJSON(t, "POST", base+"/edit", map[string]any{"line": 1, "source": "again"}, http.StatusConflict, nil)
	f.doJSON(t, "POST", base+"/approve", map[string]any{}, http.StatusConflict, nil)
	f.doJSON(t, "GET", "/api/tasks/"+uuid.NewString()+"/review/audio?line=1", nil, http.StatusNotFound, nil)
}

// putRamp stores at key a 3 s WAV at 1 kHz whose sample i is i.
func (f *fixture) putRamp(t *testing.T, key string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ramp.wav")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := media.NewWAVWriter(out, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	ramp := make([]int16, 3000)
	for i := range ramp {
		ramp[i] = int16(i)
	}
	if err := w.WriteSamples(ramp); err != nil || w.Close() != nil || out.Close() != nil {
		t.Fatal(err)
	}
	if err := f.srv.objects.PutFile(context.Background(), key, path, "audio/wav"); err != nil {
		t.Fatal(err)
	}
}

// checkClip fetches a line's audio and checks it is a WAV of frames
// frames, starting at the line's start.
func (f *fixture) checkClip(t *testing.T, path string, frames int) {
	t.Helper()
	resp := f.do(t, "GET", path, adminToken, "", nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "audio/wav" {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	r, err := media.NewWAVReader(bytes.NewReader(b))
	samples := make([]int16, 4000)
	n, _ := r.ReadSamples(samples)
	if err != nil || r.Frames != int64(frames) || n != frames || samples[0] != 1500 {
		t.Fatalf("GET %s: %d frames from %d (%v), want %d from 1500", path, n, samples[0], err, frames)
	}
}

// checkAudited finds the audit entry of action on the task holding want
// in its detail.
func (f *fixture) checkAudited(t *testing.T, action string, id uuid.UUID, want string) {
	t.Helper()
	page, err := audit.List(context.Background(), f.pool, audit.Filter{Action: action, Target: id.String(), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Entries {
		b, _ := json.Marshal(e.Detail)
		if e.Outcome == "ok" && e.Actor == "admin" && strings.Contains(string(b), want) {
			return
		}
	}
	t.Fatalf("no %s entry of %s holds %s: %+v", action, id, want, page.Entries)
}

// TestReviewExportImportThroughTheAPI: the lines go out as a subtitle file
// and come back edited; a file the reader refuses is a 400 naming its
// line; the translation of lines without one is a 409.
func TestReviewExportImportThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := tasktest.InReview(t, ctx, f.pool, task.StageTranscript)
	if _, err := f.pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, speaker) VALUES
		($1, 0, 0, 1000, 'hello there', 'Anna'), ($1, 1, 1500, 2000, 'good bye', '')`, id); err != nil {
		t.Fatal(err)
	}
	base := "/api/tasks/" + id.String() + "/review"
	resp := f.do(t, "GET", base+"/export?format=vtt", adminToken, "", nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/vtt; charset=utf-8" ||
		!strings.Contains(string(b), "00:00:00.000 --> 00:00:01.000\n<v Anna>hello there") {
		t.Fatalf("export: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	edited := strings.Replace(string(b), "good bye", "goodbye, my friends", 1)
	var ed dub.Edited
	f.doJSON(t, "POST", base+"/import", map[string]any{"subtitles": edited}, http.StatusOK, &ed)
	if len(ed.Lines) != 2 || ed.Lines[1].Source != "goodbye, my friends" || ed.Lines[0].Speaker != "Anna" || ed.Edit.Action != "import" {
		t.Fatalf("import answered %+v", ed)
	}
	f.checkAudited(t, "review", id, `"action":"import"`)
	resp = f.do(t, "POST", base+"/import", adminToken, "application/json",
		strings.NewReader(`{"subtitles": "1\n00:00:02,000 --> 00:00:01,000\nhi\n"}`))
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "line 2: ") {
		t.Fatalf("import of a cue ending before it starts: %d %s", resp.StatusCode, b)
	}
	f.doJSON(t, "GET", base+"/export?text=target", nil, http.StatusConflict, nil)
}

// TestTaskEventsStreamAReview: a task that stops in review, and goes on
// when approved, streams both changes to the task's event stream.
func TestTaskEventsStreamAReview(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := f.insertTask(t, "running", time.Now())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/api/tasks/"+id.String()+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sse := &sseReader{r: bufio.NewReader(resp.Body)}
	if name, data, err := sse.next(); err != nil || !strings.Contains(data, `"status":"running"`) {
		t.Fatalf("first event %s %s %v", name, data, err)
	}
	for _, tr := range []task.Transition{task.Hold(task.Ref{ID: id, Step: "asr"}, task.StageTranscript),
		task.Approve(task.Ref{ID: id}, task.StageTranscript)} {
		if _, err := task.Apply(ctx, f.pool, tr); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"hold": `"status":"review"`, "approve": `"status":"running"`}[tr.Name]
		for {
			name, data, err := sse.next()
			if err != nil {
				t.Fatalf("stream ended before the %s: %v", tr.Name, err)
			}
			if name == "task" && strings.Contains(data, want) {
				break
			}
		}
	}
}
