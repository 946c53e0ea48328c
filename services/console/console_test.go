package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/uploads"
	"github.com/google/uuid"
)

func TestUploadCreatesTheTaskAndPublishesItsFirstMessage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ct, body := multipartBody(t, sampleVideo(t, "2"), map[string]string{"source": "en", "target": "es", "speaker": "v1"})
	var c created
	decode(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body), http.StatusCreated, &c)
	var status, src, key string
	if err := f.pool.QueryRow(context.Background(), `SELECT status, source_language, source_video_key FROM tasks
		WHERE id = $1`, c.TaskID).Scan(&status, &src, &key); err != nil {
		t.Fatalf("task row: %v", err)
	}
	if status != "queued" || src != "en" || key != wire.DefaultKeys(c.TaskID).SourceVideo {
		t.Fatalf("task row: %s %s %s", status, src, key)
	}
	env, err := wire.Decode(f.next(t, "task.extract_audio").Body)
	if err != nil || env.TaskID != c.TaskID || env.Attempt != 1 {
		t.Fatalf("message: %+v %v", env, err)
	}
	if _, err := f.srv.objects.Stat(context.Background(), key); err != nil {
		t.Fatalf("stored video: %v", err)
	}
}

func TestUploadRefusesWhatBreaksTheLimits(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.Limits.MaxVideoBytes = 2000; c.Limits.MaxVideoSeconds = 1 })
	ct, body := multipartBody(t, sampleVideo(t, "3"), nil)
	resp := f.do(t, "POST", "/api/tasks", adminToken, ct, body)
	decode(t, resp, http.StatusRequestEntityTooLarge, nil)

	f = setup(t, func(c *Config) { c.Limits.MaxVideoSeconds = 1 })
	ct, body = multipartBody(t, sampleVideo(t, "3"), nil)
	var e apiError
	decode(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body), http.StatusRequestEntityTooLarge, &e)
	if !strings.Contains(e.Message, "MAX_VIDEO_SECONDS=1") {
		t.Fatalf("message %q does not name the setting", e.Message)
	}
	var n int
	_ = f.pool.QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d tasks created from refused uploads", n)
	}
}

func TestPresignedUploadThenCreate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var up upload
	f.doJSON(t, "POST", "/api/uploads", map[string]any{}, http.StatusCreated, &up)
	if up.ContentType != uploads.DefaultType {
		t.Fatalf("upload without a content type: %q, want %s", up.ContentType, uploads.DefaultType)
	}
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey}, http.StatusBadRequest, nil)
	postTo(t, up, sampleVideo(t, "1"))
	var c created
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey, "target": "fr"}, http.StatusCreated, &c)
	if c.TaskID != up.TaskID {
		t.Fatalf("task %s, want the reserved %s", c.TaskID, up.TaskID)
	}
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey}, http.StatusConflict, nil)
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": "videos/../x"}, http.StatusBadRequest, nil)
}

// insertTask adds a task row created at the given time.
func (f *fixture) insertTask(t *testing.T, status string, at time.Time) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO tasks (id, status, source_language, target_language,
		source_video_key, created_at, updated_at) VALUES ($1, $2, 'en', 'es', $3, $4, $4)`,
		id, status, wire.DefaultKeys(id).SourceVideo, at); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestTaskListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	f := setup(t)
	base := time.Now().Add(-time.Hour)
	var want []uuid.UUID
	for i := range 5 {
		st := "done"
		if i%2 == 1 {
			st = "failed"
		}
		want = append([]uuid.UUID{f.insertTask(t, st, base.Add(time.Duration(i)*time.Minute))}, want...)
	}
	var got []uuid.UUID
	cursor := ""
	for pages := 0; ; pages++ {
		var p taskPage
		f.doJSON(t, "GET", "/api/tasks?limit=2&cursor="+cursor, nil, http.StatusOK, &p)
		for _, s := range p.Tasks {
			got = append(got, s.TaskID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	var p taskPage
	f.doJSON(t, "GET", "/api/tasks?status=failed", nil, http.StatusOK, &p)
	if len(p.Tasks) != 2 || p.Tasks[0].TaskID != want[1] || p.Tasks[1].TaskID != want[3] {
		t.Fatalf("failed tasks %+v", p.Tasks)
	}
	// A cancelled task is listed apart from the failed ones.
	cancelled := f.insertTask(t, "cancelled", base.Add(time.Hour))
	f.doJSON(t, "GET", "/api/tasks?status=cancelled", nil, http.StatusOK, &p)
	if len(p.Tasks) != 1 || p.Tasks[0].TaskID != cancelled || p.Tasks[0].Status != "cancelled" {
		t.Fatalf("cancelled tasks %+v", p.Tasks)
	}
	f.doJSON(t, "GET", "/api/tasks?status=failed", nil, http.StatusOK, &p)
	if len(p.Tasks) != 2 {
		t.Fatalf("failed tasks with a cancelled one beside them %+v", p.Tasks)
	}
	f.doJSON(t, "GET", "/api/tasks?cursor=bogus", nil, http.StatusBadRequest, nil)
	f.doJSON(t, "GET", "/api/tasks?status=weird", nil, http.StatusBadRequest, nil)
}

func TestAuthTokensSessionsAndCSRF(t *testing.T) {
	t.Parallel()
	f := setup(t)
	decode(t, f.do(t, "GET", "/api/tasks", "", "", nil), http.StatusUnauthorized, nil)
	decode(t, f.do(t, "GET", "/api/tasks", "wrong-token-0123456789", "", nil), http.StatusUnauthorized, nil)
	decode(t, f.do(t, "GET", "/api/tasks", readToken, "", nil), http.StatusOK, nil)
	decode(t, f.do(t, "POST", "/api/uploads", readToken, "application/json", nil), http.StatusForbidden, nil)
	decode(t, f.do(t, "POST", "/api/uploads", adminToken, "application/json", nil), http.StatusCreated, nil)

	// A form post cannot log in; a wrong token sets nothing.
	decode(t, f.do(t, "POST", "/api/login", "", "application/x-www-form-urlencoded", strings.NewReader("token="+adminToken)),
		http.StatusUnsupportedMediaType, nil)
	resp := f.do(t, "POST", "/api/login", "", "application/json", strings.NewReader(`{"token":"nope-nope-nope-nope"}`))
	if len(resp.Cookies()) != 0 || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %v", resp.StatusCode, resp.Cookies())
	}
	resp = f.do(t, "POST", "/api/login", "", "application/json", strings.NewReader(`{"token":"`+adminToken+`"}`))
	var sess sessionView
	cookies := resp.Cookies()
	decode(t, resp, http.StatusOK, &sess)
	var session *http.Cookie
	for _, c := range cookies {
		if c.Name == auth.SessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || sess.Role != auth.RoleAdmin {
		t.Fatalf("session cookie %+v, answer %+v", session, sess)
	}
	withCookie := func(method, path, csrf string) *http.Response {
		req, _ := http.NewRequest(method, f.http.URL+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(session)
		if csrf != "" {
			req.Header.Set(auth.CSRFHeader, csrf)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Body.Close() })
		return r
	}
	decode(t, withCookie("GET", "/api/tasks", ""), http.StatusOK, nil)
	var e apiError
	decode(t, withCookie("POST", "/api/uploads", ""), http.StatusForbidden, &e)
	if e.Code != "csrf" {
		t.Fatalf("refusal %+v, want code csrf", e)
	}
	decode(t, withCookie("POST", "/api/uploads", "forged"), http.StatusForbidden, nil)
	decode(t, withCookie("POST", "/api/uploads", sess.CSRFToken), http.StatusCreated, nil)
	session.Value = strings.Replace(session.Value, "admin.", "read.", 1)
	decode(t, withCookie("GET", "/api/tasks", ""), http.StatusUnauthorized, nil)
	decode(t, f.do(t, "GET", "/api/openapi.json", "", "", nil), http.StatusOK, nil)
}

func TestTaskEventsStreamAChange(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.insertTask(t, "running", time.Now())
	req, _ := http.NewRequest("GET", f.http.URL+"/api/tasks/"+id.String()+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sse := &sseReader{r: bufio.NewReader(resp.Body)}
	name, data, err := sse.next()
	if err != nil || name != "task" || !strings.Contains(data, `"status":"running"`) {
		t.Fatalf("first event %s %s %v", name, data, err)
	}
	// A step attempt and a cancel made by another client arrive as events.
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO task_steps (task_id, step, attempt, status, worker)
		VALUES ($1, 'extract_audio', 1, 'running', 'w1')`, id); err != nil {
		t.Fatal(err)
	}
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/cancel", map[string]string{"reason": "test"}, http.StatusOK, nil)
	var sawStep, sawCancel bool
	for !sawStep || !sawCancel {
		name, data, err := sse.next()
		if err != nil {
			t.Fatalf("stream ended before the events (step %v, cancel %v): %v", sawStep, sawCancel, err)
		}
		sawStep = sawStep || (name == "step" && strings.Contains(data, `"worker":"w1"`))
		sawCancel = sawCancel || (name == "task" && strings.Contains(data, `"status":"cancelled"`) &&
			strings.Contains(data, "cancelled: test"))
	}
}

func TestCancelAndRetryFromTheFailedStep(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := f.insertTask(t, "running", time.Now())
	var sum taskSummary
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/cancel", nil, http.StatusOK, &sum)
	if sum.Status != "cancelled" || !strings.HasPrefix(sum.Error, "cancelled:") {
		t.Fatalf("after cancel: %+v", sum)
	}
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/cancel", nil, http.StatusConflict, nil)

	// extract_audio succeeded; asr failed twice: retry replays asr only.
	for _, s := range []struct {
		step, status string
		attempt      int
	}{{"extract_audio", "succeeded", 1}, {"asr", "failed", 1}, {"asr", "failed", 2}} {
		env, _ := wire.New(s.step, id, "trace", payloadOf(s.step, id))
		env.Attempt = s.attempt
		body, _ := env.Marshal()
		if _, err := f.pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, message, finished_at)
			VALUES ($1, $2, $3, $4, $5, now())`, id, s.step, s.attempt, s.status, body); err != nil {
			t.Fatal(err)
		}
	}
	var r retry.Retried
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/retry", nil, http.StatusOK, &r)
	if r.Status != "running" || len(r.Replayed) != 1 || r.Replayed[0].Step != "asr" || r.Replayed[0].Attempt != 3 {
		t.Fatalf("retry: %+v", r)
	}
	env, err := wire.Decode(f.next(t, "task.asr").Body)
	if err != nil || env.TaskID != id || env.Attempt != 3 {
		t.Fatalf("replayed message %+v %v", env, err)
	}
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/retry", nil, http.StatusConflict, nil)
	f.doJSON(t, "POST", "/api/tasks/"+uuid.NewString()+"/retry", nil, http.StatusNotFound, nil)

	// A task that failed before any step ran gets its first message again.
	never := f.insertTask(t, "failed", time.Now())
	f.doJSON(t, "POST", "/api/tasks/"+never.String()+"/retry", nil, http.StatusOK, &r)
	if len(r.Replayed) != 1 || r.Replayed[0].Step != "extract_audio" {
		t.Fatalf("retry of a task that never ran: %+v", r)
	}
	if env, err := wire.Decode(f.next(t, "task.extract_audio").Body); err != nil || env.TaskID != never {
		t.Fatalf("first message again: %+v %v", env, err)
	}
}

func payloadOf(step string, id uuid.UUID) any {
	k := wire.DefaultKeys(id)
	if step == "asr" {
		return wire.ASR{AudioKey: k.SourceAudio, Language: "en", OutputKey: k.ASR}
	}
	return wire.ExtractAudio{SourceVideoKey: k.SourceVideo, OutputAudioKey: k.SourceAudio}
}

func TestHealthReportsQueuesAndWorkers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if err := f.ch.Publish("task_exchange", "task.asr", false, false, amqpMsg(`{}`)); err != nil {
		t.Fatal(err)
	}
	// Two asr attempts hold a live lease, one's lease ran out (its worker
	// died: the delivery went back to the queue), one finished.
	id := f.insertTask(t, "running", time.Now())
	for i, lease := range []string{"now() + interval '1 minute'", "now() + interval '1 minute'", "now() - interval '1 second'"} {
		if _, err := f.pool.Exec(context.Background(), `INSERT INTO task_steps (task_id, step, part, attempt, status, worker, lease_until)
			VALUES ($1, 'asr', $2, 1, 'running', 'w', `+lease+`)`, id, fmt.Sprint("p", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO task_steps (task_id, step, part, attempt, status, finished_at)
		VALUES ($1, 'asr', 'p9', 1, 'succeeded', now())`, id); err != nil {
		t.Fatal(err)
	}
	var h healthReport
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.doJSON(t, "GET", "/api/system/health", nil, http.StatusOK, &h)
		if queueOf(h, "task.asr").Ready == 1 || time.Now().After(deadline) {
			break
		}
	}
	if q := queueOf(h, "task.asr"); q.Ready != 1 || q.Consumers != 0 || q.Kind != "work" ||
		q.Unacknowledged == nil || *q.Unacknowledged != 2 {
		t.Fatalf("task.asr %+v, want 1 ready, 2 unacknowledged", q)
	}
	if q := queueOf(h, "task.tts"); q.Unacknowledged == nil || *q.Unacknowledged != 0 {
		t.Fatalf("task.tts %+v, want 0 unacknowledged", q)
	}
	if q := queueOf(h, "task.dlq"); q.Unacknowledged != nil {
		t.Fatalf("task.dlq %+v, want unacknowledged null (not derivable)", q)
	}
	for _, name := range []string{"task.dlq", "task.tts_compensation", "task.delay.1s", "task.waiting_queue"} {
		if q := queueOf(h, name); q.Name == "" || q.Missing {
			t.Fatalf("queue %s not reported: %+v", name, h.Queues)
		}
	}
	if h.Status != "degraded" || h.Services.Total != 5 || h.Services.Available != 0 ||
		!strings.Contains(strings.Join(h.Reasons, ";"), "no workers consume task.asr (1 messages waiting)") {
		t.Fatalf("health %+v", h)
	}
	if h.Dependencies["postgres"] != "ok" || h.Dependencies["rabbitmq"] != "ok" || h.Dependencies["objectStore"] != "ok" {
		t.Fatalf("dependencies %v", h.Dependencies)
	}
}

func queueOf(h healthReport, name string) queueState {
	for _, q := range h.Queues {
		if q.Name == name {
			return q
		}
	}
	return queueState{}
}

func TestOpenAPIDescribesExactlyTheRoutesServed(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, rt := range (&server{cfg: &Config{}}).routes() {
		served[rt.Method+" "+rt.Path] = true
		if !documented[rt.Method+" "+rt.Path] {
			t.Errorf("%s %s is served but not in openapi.json", rt.Method, rt.Path)
		}
	}
	for k := range documented {
		if !served[k] {
			t.Errorf("%s is in openapi.json but not served", k)
		}
	}
}
