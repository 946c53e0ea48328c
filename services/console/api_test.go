package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/google/uuid"
)

// addAttempt records one attempt of a part of a step.
func (f *fixture) addAttempt(t *testing.T, id uuid.UUID, step, part string, attempt int, status string, started time.Time, took time.Duration) {
	t.Helper()
	var finished *time.Time
	if status != "running" {
		e := started.Add(took)
		finished = &e
	}
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO task_steps (task_id, step, part, attempt, status,
		started_at, finished_at, lease_until) VALUES ($1, $2, $3, $4, $5, $6, $7, now() + interval '1 minute')`,
		id, step, part, attempt, status, started, finished); err != nil {
		t.Fatal(err)
	}
}

func TestTaskDetailAndRealtimeStatusCountParts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	t0 := time.Now().Add(-10 * time.Minute)
	id := f.insertTask(t, "running", t0)
	f.addAttempt(t, id, "extract_audio", "", 1, "succeeded", t0.Add(time.Second), 2*time.Second)
	f.addAttempt(t, id, "asr", "", 1, "succeeded", t0.Add(4*time.Second), 3*time.Second)
	for _, p := range []string{"p1", "p2"} {
		if _, err := f.pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', $2)`, id, p); err != nil {
			t.Fatal(err)
		}
	}
	f.addAttempt(t, id, "translate", "p1", 1, "succeeded", t0.Add(8*time.Second), time.Second)
	f.addAttempt(t, id, "translate", "p2", 1, "failed", t0.Add(8*time.Second), time.Second)
	f.addAttempt(t, id, "translate", "p2", 2, "running", t0.Add(10*time.Second), 0)
	// Queue waits of the parts: extract_audio 3 s, translate p1 1 s, p2
	// 0.5 s + 1.5 s over its two attempts; asr's not measured.
	if _, err := f.pool.Exec(ctx, `UPDATE task_steps SET queue_wait_ms = CASE
		WHEN step = 'extract_audio' THEN 3000 WHEN part = 'p1' THEN 1000 WHEN attempt = 1 THEN 500 ELSE 1500 END
		WHERE task_id = $1 AND step <> 'asr'`, id); err != nil {
		t.Fatal(err)
	}

	var d taskDetail
	f.doJSON(t, "GET", "/api/tasks/"+id.String(), nil, http.StatusOK, &d)
	tr := d.Steps[2]
	if d.Steps[0].Status != "succeeded" || *d.Steps[0].DurationMS != 2000 || tr.Status != "running" || len(tr.Parts) != 2 ||
		tr.Parts[1].Part != "p2" || len(tr.Parts[1].Attempts) != 2 || tr.Parts[1].Attempts[0].Status != "failed" ||
		d.Steps[3].Status != "pending" || d.Links.Source == nil || d.Links.Output != nil {
		t.Fatalf("detail %+v", d)
	}
	var rs realtimeStatus
	f.doJSON(t, "GET", "/api/tasks/"+id.String()+"/realtime-status", nil, http.StatusOK, &rs)
	want := progress{Total: 6, Done: 3, Pending: 3, Failed: 0}
	if rs.TaskID != id || rs.Status != "running" || rs.Progress != want {
		t.Fatalf("realtime %+v, want progress %+v", rs, want)
	}
	if rs.Metrics.Throughput <= 0 || rs.Metrics.EstimatedCompletion == nil || rs.Metrics.AvgWaitTime != 2 || rs.Metrics.WaitedParts != 3 {
		t.Fatalf("metrics %+v, want throughput, an estimate and a wait of 2 s per part over 3 parts", rs.Metrics)
	}
	if tm := rs.TaskMetrics; tm.PartsDone != 3 || tm.PartsTotal != 6 || tm.AvgPartWait == nil || *tm.AvgPartWait != 2 ||
		tm.FirstOutputAt != nil || tm.CompletedAt != nil || !tm.SubmittedAt.Equal(t0.Truncate(time.Microsecond)) {
		t.Fatalf("task metrics %+v", tm)
	}
	if rs.LastActivity.Before(t0.Add(10 * time.Second).Truncate(time.Millisecond)) {
		t.Fatalf("last activity %s, before the last attempt started", rs.LastActivity)
	}
	f.doJSON(t, "GET", "/api/tasks/"+uuid.NewString(), nil, http.StatusNotFound, nil)
	f.doJSON(t, "GET", "/api/tasks/not-a-uuid/realtime-status", nil, http.StatusBadRequest, nil)
}

func TestDoneTaskLinksDownloadTheOutputs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := f.insertTask(t, "done", time.Now())
	out := "outputs/" + id.String()
	objects := map[string]string{out + "/final.mp4": "video", out + "/final.es.srt": "1\n", out + "/timing.json": `{"segments":[]}`,
		out + "/final.es.vtt": "WEBVTT\n", out + "/final.burned.mp4": "burned"}
	for k, v := range objects {
		if err := f.srv.objects.Put(ctx, k, strings.NewReader(v), int64(len(v)), "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
	}
	result, _ := json.Marshal(map[string]any{"output_video_key": out + "/final.mp4", "timing_report_key": out + "/timing.json",
		"subtitles": map[string]string{"es": out + "/final.es.srt"}, "subtitles_vtt": map[string]string{"es": out + "/final.es.vtt"},
		"burned_video_key": out + "/final.burned.mp4"})
	if _, err := f.pool.Exec(ctx, `UPDATE tasks SET result = $2 WHERE id = $1`, id, result); err != nil {
		t.Fatal(err)
	}
	var d taskDetail
	f.doJSON(t, "GET", "/api/tasks/"+id.String(), nil, http.StatusOK, &d)
	if d.Links.Output == nil || len(d.Links.Subtitles) != 2 || d.Links.Subtitles[0].Language != "es" ||
		d.Links.Subtitles[0].Format != "srt" || d.Links.Subtitles[1].Format != "vtt" || d.Links.Burned == nil ||
		string(d.TimingReport) != `{"segments":[]}` {
		t.Fatalf("links %+v report %s", d.Links, d.TimingReport)
	}
	for _, link := range []string{d.Links.Subtitles[1].URL, *d.Links.Burned} {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || (string(b) != "WEBVTT\n" && string(b) != "burned") {
			t.Fatalf("GET %s: %d %q", link, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(*d.Links.Output)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "video" {
		t.Fatalf("presigned output: %d %q", resp.StatusCode, b)
	}
	var rs realtimeStatus
	f.doJSON(t, "GET", "/api/tasks/"+id.String()+"/realtime-status", nil, http.StatusOK, &rs)
	if rs.Progress.Done != rs.Progress.Total || rs.Progress.Pending != 0 || rs.Metrics.EstimatedCompletion != nil {
		t.Fatalf("done task realtime %+v", rs)
	}
}

func TestDeadLettersListShowAndReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.insertTask(t, "failed", time.Now())
	env, _ := wire.New(wire.StepASR, id, "trace", payloadOf("asr", id))
	body, _ := env.Marshal()
	var dl int64
	if err := f.pool.QueryRow(context.Background(), `INSERT INTO dead_letters (message_id, task_id, step, attempt,
		failure_reason, original_message) VALUES ('m1', $1, 'asr', 1, 'engine down', $2) RETURNING id`, id, body).Scan(&dl); err != nil {
		t.Fatal(err)
	}
	var list struct{ DeadLetters []deadLetterView }
	f.doJSON(t, "GET", "/api/dead-letters?pending=true&step=asr", nil, http.StatusOK, &list)
	if len(list.DeadLetters) != 1 || list.DeadLetters[0].FailureReason != "engine down" {
		t.Fatalf("list %+v", list)
	}
	var one deadLetterView
	f.doJSON(t, "GET", "/api/dead-letters/"+itoa(dl), nil, http.StatusOK, &one)
	if !strings.Contains(string(one.OriginalMessage), id.String()) {
		t.Fatalf("show %+v", one)
	}
	f.doJSON(t, "POST", "/api/dead-letters/"+itoa(dl)+"/replay", map[string]bool{}, http.StatusOK, nil)
	if env, err := wire.Decode(f.next(t, "task.asr").Body); err != nil || env.TaskID != id || env.Attempt != 2 {
		t.Fatalf("replayed %+v %v", env, err)
	}
	f.doJSON(t, "POST", "/api/dead-letters/"+itoa(dl)+"/replay", map[string]bool{}, http.StatusConflict, nil)
	f.doJSON(t, "POST", "/api/dead-letters/"+itoa(dl)+"/replay", map[string]bool{"force": true}, http.StatusOK, nil)
	f.doJSON(t, "GET", "/api/dead-letters/999999", nil, http.StatusNotFound, nil)
	f.doJSON(t, "GET", "/api/dead-letters?step=nope", nil, http.StatusBadRequest, nil)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestCompensationListAndRequeue(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := f.insertTask(t, "compensating", time.Now().Add(-time.Hour))
	f.addAttempt(t, id, "translate", "", 1, "succeeded", time.Now().Add(-time.Hour), time.Second)
	if _, err := f.pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key,
		tts_error, tts_failures) VALUES ($1, 0, 0, 1000, 'a', 'a', $2, '', 0), ($1, 1, 1000, 2000, 'b', 'b', NULL, 'espeak crashed', 3)`,
		id, wire.SegmentKey(id, 0)); err != nil {
		t.Fatal(err)
	}
	var list struct{ Tasks []compensationView }
	f.doJSON(t, "GET", "/api/compensations", nil, http.StatusOK, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != id || len(list.Tasks[0].MissingSegments) != 1 ||
		list.Tasks[0].MissingSegments[0] != 1 || list.Tasks[0].LastError != "espeak crashed" {
		t.Fatalf("compensations %+v", list)
	}
	var r struct{ Requeued []requeueView }
	f.doJSON(t, "POST", "/api/compensations/requeue", map[string]int{"limit": 10}, http.StatusOK, &r)
	if len(r.Requeued) != 1 || r.Requeued[0].TaskID != id || r.Requeued[0].Attempt < 1 {
		t.Fatalf("requeued %+v", r)
	}
	if env, err := wire.Decode(f.next(t, "task.tts").Body); err != nil || env.TaskID != id {
		t.Fatalf("tts message %+v %v", env, err)
	}
	var sum taskSummary
	f.doJSON(t, "GET", "/api/tasks/"+id.String(), nil, http.StatusOK, &sum)
	if sum.Status != "running" {
		t.Fatalf("task %s after requeue, want running", sum.Status)
	}
}

func TestReadOnlySessionCannotChangeState(t *testing.T) {
	t.Parallel()
	f := setup(t)
	resp := f.do(t, "POST", "/api/login", "", "application/json", strings.NewReader(`{"token":"`+readToken+`"}`))
	var sess sessionView
	cookies := resp.Cookies()
	decode(t, resp, http.StatusOK, &sess)
	if sess.Role != auth.RoleRead {
		t.Fatalf("role %q", sess.Role)
	}
	req, _ := http.NewRequest("POST", f.http.URL+"/api/uploads", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(auth.CSRFHeader, sess.CSRFToken)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var e apiError
	decode(t, r, http.StatusForbidden, &e)
	if e.Code != "forbidden" {
		t.Fatalf("refusal %+v", e)
	}
}

// The proxy is checked against a stand-in dispatcher: what it forwards and
// how it answers without one.
func TestWaitingQueueProxy(t *testing.T) {
	t.Parallel()
	var gotPath, gotAuth string
	disp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth = r.URL.Path, r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"waiting":3}`)
	}))
	defer disp.Close()
	f := setup(t, func(c *Config) { c.DispatcherURL, c.DispatcherToken = disp.URL, "disp-token" })
	var out map[string]int
	agent := uuid.NewString()
	f.doJSON(t, "GET", "/api/waiting/agents/"+agent+"/status", nil, http.StatusOK, &out)
	if out["waiting"] != 3 || gotPath != "/queue/agents/"+agent+"/status" || gotAuth != "Bearer disp-token" {
		t.Fatalf("proxied %v to %q with %q", out, gotPath, gotAuth)
	}
	// A malformed id is never forwarded (waiting_test.go).
	f.doJSON(t, "GET", "/api/waiting/agents/a%2F1/status", nil, http.StatusBadRequest, nil)
	f.srv.cfg.DispatcherURL = ""
	f.doJSON(t, "GET", "/api/waiting/entries/"+uuid.NewString(), nil, http.StatusServiceUnavailable, nil)
}
