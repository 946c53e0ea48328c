package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// statusOf reads a task's status and error.
func (f *fixture) statusOf(t *testing.T, id uuid.UUID) (string, string) {
	t.Helper()
	var status, errText string
	if err := f.pool.QueryRow(context.Background(), `SELECT status, error FROM tasks WHERE id = $1`, id).Scan(&status, &errText); err != nil {
		t.Fatal(err)
	}
	return status, errText
}

// TestParentRedubIsRefusedNamingTheChildren: a done parent is not re-dubbed
// (409 naming each child; nothing changes), a child is; an empty text is a
// 400. The parent's detail lists no output and no steps past asr.
func TestParentRedubIsRefusedNamingTheChildren(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	parent, es, ca := f.insertFamily(t)
	if _, err := f.pool.Exec(ctx, `UPDATE tasks SET status = 'done', output_video_key = $2 WHERE id IN ($1, $3)`,
		parent, wire.DefaultKeys(parent).OutputVideo, ca); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{parent, es} {
		if _, err := f.pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text)
			VALUES ($1, 0, 0, 900, 'hello', 'hola')`, id); err != nil {
			t.Fatal(err)
		}
	}
	resp := f.do(t, "POST", "/api/tasks/"+parent.String()+"/redub", adminToken, "application/json",
		strings.NewReader(`{"segment": 1, "text": "otra"}`))
	var e struct{ Code, Message string }
	decode(t, resp, http.StatusConflict, &e)
	for _, want := range []string{"es " + es.String(), "ca " + ca.String()} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("409 %q does not name the child %q", e.Message, want)
		}
	}
	if st, _ := f.statusOf(t, parent); st != "done" {
		t.Fatalf("refused redub left the parent %s", st)
	}
	var versions int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM output_versions WHERE task_id = $1`, parent).Scan(&versions); err != nil || versions != 0 {
		t.Fatalf("refused redub recorded %d versions (%v)", versions, err)
	}
	f.doJSON(t, "POST", "/api/tasks/"+es.String()+"/redub", map[string]any{"segment": 1, "text": "  "}, http.StatusBadRequest, nil)
	f.doJSON(t, "POST", "/api/tasks/"+es.String()+"/redub", map[string]any{"segment": 1, "text": "otra"}, http.StatusAccepted, nil)

	var d taskDetail
	f.doJSON(t, "GET", "/api/tasks/"+parent.String(), nil, http.StatusOK, &d)
	if d.OutputVideoKey != "" || d.Links.Output != nil || len(d.Steps) != 2 || d.Steps[1].Step != "asr" {
		t.Fatalf("parent detail: output %q %v, steps %+v", d.OutputVideoKey, d.Links.Output, d.Steps)
	}
}

// TestCancelAndRetryOfAParentApplyToTheChildren: cancelling a running parent
// cancels the child still running (the done one stays done); retrying the
// parent retries that child from its failed step and runs the parent again.
func TestCancelAndRetryOfAParentApplyToTheChildren(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	parent, es, ca := f.insertFamily(t)
	// ca's translate failed once and runs again.
	for _, s := range []struct {
		step, status string
		attempt      int
	}{{"extract_audio", "succeeded", 1}, {"asr", "succeeded", 1}, {"translate", "failed", 1}, {"translate", "running", 2}} {
		var payload any = payloadOf(s.step, ca)
		if s.step == "translate" {
			payload = wire.Translate{TaskID: ca, SegmentIDs: []string{"seg-0"}, SourceLanguage: "en", TargetLanguage: "ca"}
		}
		env, err := wire.New(s.step, ca, "trace", payload)
		if err != nil {
			t.Fatal(err)
		}
		env.Attempt = s.attempt
		body, _ := env.Marshal()
		if _, err := f.pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, message, finished_at)
			VALUES ($1, $2, $3, $4, $5, CASE WHEN $4 = 'running' THEN NULL ELSE now() END)`, ca, s.step, s.attempt, s.status, body); err != nil {
			t.Fatal(err)
		}
	}
	var sum taskSummary
	f.doJSON(t, "POST", "/api/tasks/"+parent.String()+"/cancel", map[string]string{"reason": "wrong video"}, http.StatusOK, &sum)
	if st, errText := f.statusOf(t, ca); st == "running" || !strings.HasPrefix(errText, "cancelled:") {
		t.Fatalf("child ca after the parent's cancel: %s %q", st, errText)
	}
	if st, _ := f.statusOf(t, es); st != "done" {
		t.Fatalf("child es after the parent's cancel: %s, want done", st)
	}
	if st, errText := f.statusOf(t, parent); st == "running" || st == "done" || !strings.HasPrefix(errText, "cancelled:") {
		t.Fatalf("parent after cancel: %s %q", st, errText)
	}

	var r retry.Retried
	f.doJSON(t, "POST", "/api/tasks/"+parent.String()+"/retry", nil, http.StatusOK, &r)
	if r.Status != "running" || len(r.Replayed) != 1 || r.Replayed[0].TaskID == nil || *r.Replayed[0].TaskID != ca ||
		r.Replayed[0].Step != "translate" || r.Replayed[0].Attempt != 3 {
		t.Fatalf("retry of the parent: %+v", r)
	}
	if env, err := wire.Decode(f.next(t, "task.translate").Body); err != nil || env.TaskID != ca || env.Attempt != 3 {
		t.Fatalf("replayed message %+v %v", env, err)
	}
	if st, _ := f.statusOf(t, ca); st != "running" {
		t.Fatalf("child ca after the parent's retry: %s", st)
	}
	if st, errText := f.statusOf(t, parent); st != "running" || errText != "" {
		t.Fatalf("parent after retry: %s %q", st, errText)
	}
	// Nothing failed any more: a second retry is refused.
	f.doJSON(t, "POST", "/api/tasks/"+parent.String()+"/retry", nil, http.StatusConflict, nil)
}
