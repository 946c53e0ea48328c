package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/dubflow/dubflow/pkg/testenv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/compensation"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// row is a segment as the test writes and reads it.
type row struct {
	startMS, endMS int
	mt, key        *string
	params         map[string]any
}

func ptr(s string) *string { return &s }

// newTask creates a task whose translate step succeeded, with segments.
func newTask(s *testenv.Stack, rows []row) uuid.UUID {
	s.T.Helper()
	ctx := context.Background()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key, output_video_key)
		VALUES ($1, 'running', 'en', 'es', $2, $3)`, id, keys.SourceVideo, keys.OutputVideo); err != nil {
		s.T.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'translate', 1, 'succeeded', now())`, id); err != nil {
		s.T.Fatal(err)
	}
	for i, r := range rows {
		var params []byte
		if r.params != nil {
			params, _ = json.Marshal(r.params)
		}
		if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key, tts_params_json)
			VALUES ($1, $2, $3, $4, 'text', $5, $6, $7)`, id, i, r.startMS, r.endMS, r.mt, r.key, params); err != nil {
			s.T.Fatal(err)
		}
	}
	return id
}

func segments(s *testenv.Stack, id uuid.UUID) []row {
	s.T.Helper()
	rows, err := s.DB.Pool.Query(context.Background(), `SELECT start_ms, end_ms, mt_text, tts_audio_key, tts_params_json
		FROM segments WHERE task_id = $1 ORDER BY idx`, id)
	if err != nil {
		s.T.Fatal(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.startMS, &r.endMS, &r.mt, &r.key, &r.params); err != nil {
			s.T.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func publishTTS(s *testenv.Stack, id uuid.UUID, p wire.TTS) {
	s.T.Helper()
	p.TaskID = id
	env, err := wire.New(wire.StepTTS, id, "trace-tts", p)
	if err != nil {
		s.T.Fatal(err)
	}
	s.Publish(env)
}

// TestTTS runs espeak-ng on one worker, then a worker whose engine always
// fails, on the same stack (starting one costs seconds).
func TestTTS(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, run, map[string]string{"TTS_BATCH_SIZE": "2", "TTS_MAX_CONCURRENCY": "2"})
	stop := s.Start()
	t.Run("synthesizes what is missing and emits mux_video", func(t *testing.T) { synthesizes(t, s) })
	t.Run("a part synthesizes its segments; the last part emits mux_video once", func(t *testing.T) { parts(t, s) })
	t.Run("a message without segment ids covers the parts", func(t *testing.T) { covers(t, s) })
	t.Run("seed 001's task.tts from an outside publisher covers the batches' parts", func(t *testing.T) { seedShaped(t, s) })
	t.Run("a speaker that is no voice fails the task at once", func(t *testing.T) { unknownSpeaker(t, s) })
	stop()

	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "engine overloaded", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	s.Env["TTS_ENGINE"], s.Env["TTS_BASE_URL"] = "tts_service", srv.URL
	s.Env["TTS_MAX_RETRIES"], s.Env["TTS_RETRY_DELAY_SECONDS"] = "5", "0.05"
	s.Env["TTS_MAX_REQUEUES"] = "1"
	s.Env["OPS_ADDR"] = testenv.FreeAddr(t)
	s.Start()
	var compensating uuid.UUID
	t.Run("a failing engine compensates and parks", func(t *testing.T) { compensating = compensates(t, s, &calls) })
	t.Run("after TTS_MAX_REQUEUES requeues the task fails", func(t *testing.T) { requeuesBounded(t, s, compensating) })
}

// unknownSpeaker: a tts message whose speaker is none of the engine's
// voices (an outside publisher's: the doors refuse it) fails the step and
// the task for good, saying so, without a compensation.
func unknownSpeaker(t *testing.T, s *testenv.Stack) {
	id := newTask(s, []row{{startMS: 0, endMS: 1500, mt: ptr("Hola.")}})
	publishTTS(s, id, wire.TTS{SpeakerID: "zz9+nonexistent"})
	if got := s.WaitStep(id, wire.StepTTS, "succeeded", "failed", "parked"); got != "failed" {
		t.Fatalf("tts %s, want failed: %+v", got, s.Task(id))
	}
	s.Refused(t, id, `speaker "zz9+nonexistent": no such voice (installed: `)
	if n := s.Depth("task.tts_compensation"); n != 0 {
		t.Errorf("%d compensations for a speaker that is no voice", n)
	}
}

// publisher publishes on the stack's channel, for compensation.Requeue.
type publisher struct{ s *testenv.Stack }

func (p publisher) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	return p.s.Ch.PublishWithContext(ctx, exchange, key, false, false, msg)
}

// requeuesBounded: the compensating task is re-driven once (tts_requeue's
// pass); its synthesis fails again, and with TTS_MAX_REQUEUES 1 the task
// fails, its error saying how often it was requeued, instead of
// compensating again.
func requeuesBounded(t *testing.T, s *testenv.Stack, id uuid.UUID) {
	ctx := context.Background()
	if id == uuid.Nil {
		t.Skip("no compensating task")
	}
	tasks, err := compensation.Requeue(ctx, s.DB.Pool, publisher{s}, compensation.Options{Limit: 10})
	if err != nil || len(tasks) != 1 || tasks[0].TaskID != id {
		t.Fatalf("requeue: %+v, %v", tasks, err)
	}
	s.WaitFor("the task to end", func() bool { return s.Task(id).Status == "failed" })
	_, dl := s.Refused(t, id, "speech synthesis failed for 2 segments; first: segment 0 failed after 3 tries")
	if task := s.Task(id); !strings.Contains(task.Error, "and still after 1 requeue (TTS_MAX_REQUEUES 1)") {
		t.Errorf("task error %q, want the requeues counted", task.Error)
	}
	if dl.RetryCount != 0 {
		t.Errorf("dead letter retry_count %d, want 0: the step was not retried", dl.RetryCount)
	}
	if n := s.Depth("task.tts_compensation"); n != 0 {
		t.Errorf("%d compensations after the last requeue", n)
	}
}

func synthesizes(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	id := uuid.New()
	id = newTask(s, []row{
		{startMS: 0, endMS: 1500, mt: ptr("Hola, amigo mío.")},
		{startMS: 2500, endMS: 3000, mt: ptr("")},
		{startMS: 3000, endMS: 4000, mt: ptr("Ya hecho."), key: ptr(wire.SegmentKey(id, 2)), params: map[string]any{"pre": "existing"}},
		{startMS: 4500, endMS: 6000, mt: ptr("Muchas gracias por todo, de verdad.")},
	})
	publishTTS(s, id, wire.TTS{})
	if got := s.WaitStep(id, wire.StepTTS, "succeeded", "failed", "parked"); got != "succeeded" {
		t.Fatalf("tts %s: %+v", got, s.Task(id))
	}
	segs := segments(s, id)
	// The engine aims at the source line (not the slot up to the next
	// one), at most 1.3 times its default rate (TTS_MAX_RATE).
	for _, c := range []struct{ idx, slot, line int }{{0, 2500, 1500}, {3, 1500, 1500}} {
		r := segs[c.idx]
		if r.key == nil || *r.key != wire.SegmentKey(id, c.idx) {
			t.Errorf("segment %d: key %v", c.idx, r.key)
			continue
		}
		if r.params["engine"] != "espeak-ng" || r.params["slot_ms"] != float64(c.slot) || r.params["target_duration_ms"] != float64(c.line) ||
			r.params["rate_wpm"].(float64) > 227 {
			t.Errorf("segment %d: params %v, want espeak-ng aiming at the %d ms line, at most 227 wpm", c.idx, r.params, c.line)
		}
		wav, err := s.Blob.Get(ctx, *r.key, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		w, err := media.NewWAVReader(bytes.NewReader(wav))
		if err != nil || w.Duration() <= 0 {
			t.Errorf("segment %d: stored clip is not audio: %v", c.idx, err)
		}
	}
	if r := segs[1]; r.key == nil || *r.key != "" || r.params["skipped"] != "empty text" {
		t.Errorf("empty segment: key %v params %v, want '' and skipped", r.key, r.params)
	}
	if r := segs[2]; r.params["pre"] != "existing" {
		t.Errorf("segment with audio was redone: params %v", r.params)
	}
	if _, err := s.Blob.Stat(ctx, wire.SegmentKey(id, 2)); err == nil {
		t.Errorf("segment with audio was synthesized again")
	}

	var p wire.MuxVideo
	m := s.NextMessage(t, "task.mux_video", &p)
	keys := wire.DefaultKeys(id)
	if m.TaskID != id || p != (wire.MuxVideo{TaskID: id, SourceVideoKey: keys.SourceVideo, TTSAudioKey: keys.DubAudio, OutputVideoKey: keys.OutputVideo}) {
		t.Errorf("mux_video message %+v payload %+v", m, p)
	}
}

func compensates(t *testing.T, s *testenv.Stack, calls *atomic.Int32) uuid.UUID {
	ctx := context.Background()
	id := newTask(s, []row{
		{startMS: 0, endMS: 1500, mt: ptr("Hola.")},
		{startMS: 2000, endMS: 3000, mt: ptr("Adiós.")},
	})
	retries := 2
	delay := 0.01
	publishTTS(s, id, wire.TTS{MaxRetries: &retries, RetryDelaySec: &delay})
	if got := s.WaitStep(id, wire.StepTTS, "succeeded", "failed", "parked"); got != "parked" {
		t.Fatalf("tts %s, want parked: %+v", got, s.Task(id))
	}
	if n := calls.Load(); n != 2*(1+int32(retries)) {
		t.Errorf("engine called %d times, want %d (the payload's max_retries overrides TTS_MAX_RETRIES)", n, 2*(1+retries))
	}
	seen := map[int]bool{}
	for range 2 {
		c, err := wire.DecodeCompensation(s.Next("task.tts_compensation", 10e9))
		if err != nil {
			t.Fatal(err)
		}
		if c.TaskID != id || c.RoutingKey != "task.tts" || c.Error == "" || c.TraceID != "trace-tts" {
			t.Errorf("compensation %+v", c)
		}
		seen[c.SegmentIdx] = true
	}
	if !seen[0] || !seen[1] {
		t.Errorf("compensation for segments %v, want 0 and 1", seen)
	}
	var failures, missing int
	if err := s.DB.Pool.QueryRow(ctx, `SELECT min(tts_failures), count(*) FILTER (WHERE tts_error = '' OR tts_failed_at IS NULL OR tts_audio_key IS NOT NULL)
		FROM segments WHERE task_id = $1`, id).Scan(&failures, &missing); err != nil || failures != 1 || missing != 0 {
		t.Errorf("segments: min tts_failures %d, %d without a failure record (err %v)", failures, missing, err)
	}
	// Its error counts the tries truly: the payload's 2 retries are 3 tries.
	want := "tts: speech synthesis failed for 2 segments; first: segment 0 failed after 3 tries: "
	if task := s.Task(id); task.Status != "compensating" || !strings.HasPrefix(task.Error, want) ||
		!strings.HasSuffix(task.Error, "(requeues left: 1)") {
		t.Errorf("task = %+v, want compensating: %s… (requeues left: 1)", task, want)
	}
	if n := s.Depth("task.mux_video"); n != 0 {
		t.Errorf("%d mux_video messages for a task with holes", n)
	}
	if n := s.Depth("task.dlq"); n != 0 {
		t.Errorf("%d dead letters: a parked step is not dead-lettered", n)
	}
	return id
}

// partTask is newTask with asr succeeded and the task's tts parts
// registered, as the translate batches emit them.
func partTask(s *testenv.Stack, rows []row, parts ...string) uuid.UUID {
	s.T.Helper()
	ctx := context.Background()
	id := newTask(s, rows)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'asr', 1, 'succeeded', now())`, id); err != nil {
		s.T.Fatal(err)
	}
	for _, p := range parts {
		if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'tts', $2)`, id, p); err != nil {
			s.T.Fatal(err)
		}
	}
	return id
}

// waitQuiet waits until the outbox is empty: what the steps emitted is in
// the queues.
func waitQuiet(s *testenv.Stack) {
	s.T.Helper()
	s.WaitFor("the outbox to drain", func() bool {
		var n int
		err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n)
		return err == nil && n == 0
	})
}

// waitPart waits for a tts part to end.
func waitPart(s *testenv.Stack, id uuid.UUID, part string) string {
	s.T.Helper()
	var status string
	s.WaitFor("tts part "+part, func() bool {
		err := s.DB.Pool.QueryRow(context.Background(), `SELECT status FROM task_steps WHERE task_id = $1 AND step = 'tts' AND part = $2
			AND status <> 'running' ORDER BY attempt DESC LIMIT 1`, id, part).Scan(&status)
		return err == nil
	})
	return status
}

func parts(t *testing.T, s *testenv.Stack) {
	id := partTask(s, []row{
		{startMS: 0, endMS: 1000, mt: ptr("Hola.")},
		{startMS: 1500, endMS: 2500, mt: ptr("Buenos días.")},
		{startMS: 3000, endMS: 4000, mt: ptr("Adiós.")},
	}, "seg-0,seg-1", "seg-2")
	publishTTS(s, id, wire.TTS{SegmentIDs: []string{"seg-0", "seg-1"}})
	if got := waitPart(s, id, "seg-0,seg-1"); got != "succeeded" {
		t.Fatalf("tts part seg-0,seg-1 %s: %+v", got, s.Task(id))
	}
	segs := segments(s, id)
	if segs[0].key == nil || segs[1].key == nil || segs[2].key != nil {
		t.Fatalf("after the first part: keys %v %v %v, want segments 0 and 1 only", segs[0].key, segs[1].key, segs[2].key)
	}
	waitQuiet(s)
	if n := s.Depth("task.mux_video"); n != 0 {
		t.Fatalf("%d mux_video messages while a part is still to run", n)
	}
	publishTTS(s, id, wire.TTS{SegmentIDs: []string{"seg-2"}})
	var p wire.MuxVideo
	m := s.NextMessage(t, "task.mux_video", &p)
	keys := wire.DefaultKeys(id)
	if m.TaskID != id || p != (wire.MuxVideo{TaskID: id, SourceVideoKey: keys.SourceVideo, TTSAudioKey: keys.DubAudio, OutputVideoKey: keys.OutputVideo}) {
		t.Errorf("mux_video message %+v payload %+v", m, p)
	}
	if segs := segments(s, id); segs[2].key == nil || *segs[2].key != wire.SegmentKey(id, 2) {
		t.Errorf("segment 2: key %v", segs[2].key)
	}
	// A copy of a finished part is skipped and emits nothing.
	publishTTS(s, id, wire.TTS{SegmentIDs: []string{"seg-2"}})
	s.WaitFor("the copy to be consumed", func() bool { return s.Depth("task.tts") == 0 })
	waitQuiet(s)
	if n := s.Depth("task.mux_video"); n != 0 {
		t.Errorf("%d more mux_video messages, want exactly one", n)
	}
}

func covers(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	id := partTask(s, []row{
		{startMS: 0, endMS: 1000, mt: ptr("Hola.")},
		{startMS: 1500, endMS: 2500, mt: ptr("Buenos días.")},
	}, "seg-0", "seg-1")
	// seg-0's part succeeded, seg-1's was parked (its synthesis failed).
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, finished_at)
		VALUES ($1, 'tts', 'seg-0', 1, 'succeeded', now()), ($1, 'tts', 'seg-1', 1, 'parked', now())`, id); err != nil {
		t.Fatal(err)
	}
	publishTTS(s, id, wire.TTS{})
	if got := waitPart(s, id, ""); got != "succeeded" {
		t.Fatalf("tts %s: %+v", got, s.Task(id))
	}
	for i, r := range segments(s, id) {
		if r.key == nil || *r.key != wire.SegmentKey(id, i) {
			t.Errorf("segment %d: key %v, want synthesized", i, r.key)
		}
	}
	var done bool
	if err := s.DB.Pool.QueryRow(ctx, `SELECT step_succeeded($1, 'tts')`, id).Scan(&done); err != nil || !done {
		t.Errorf("tts step succeeded = %v (%v), want the parked part covered", done, err)
	}
	var p wire.MuxVideo
	if m := s.NextMessage(t, "task.mux_video", &p); m.TaskID != id {
		t.Errorf("mux_video message %+v", m)
	}
}

// seedShaped: seed 001's tts message — one for the whole task, after every
// translation, its payload exactly as the seed's example, published as an
// outside publisher does (no message id, no x-dubflow-ready-at, plain
// AMQP) — is accepted while the task's translate batches have registered
// their own tts parts (pending): it synthesizes every segment, covers the
// parts, and emits mux_video once; the batches' part messages arriving
// after it are skipped and emit nothing more.
func seedShaped(t *testing.T, s *testenv.Stack) {
	id := partTask(s, []row{
		{startMS: 0, endMS: 1000, mt: ptr("Hola.")},
		{startMS: 1500, endMS: 2500, mt: ptr("Buenos días.")},
		{startMS: 3000, endMS: 4000, mt: ptr("Adiós.")},
	}, "seg-0,seg-1", "seg-2")
	body := `{"task_id": "` + id.String() + `", "step": "tts", "attempt": 1, "trace_id": "trace-123456",
		"created_at": "` + time.Now().UTC().Format(time.RFC3339) + `",
		"payload": {"task_id": "` + id.String() + `", "batch_size": 20, "max_concurrency": 4, "max_retries": 3,
		"retry_delay_sec": 2.0, "speaker_id": "default"}}`
	s.PublishRaw("task.tts", []byte(body))
	if got := waitPart(s, id, ""); got != "succeeded" {
		t.Fatalf("seed-shaped tts %s: %+v", got, s.Task(id))
	}
	for i, r := range segments(s, id) {
		if r.key == nil || *r.key != wire.SegmentKey(id, i) {
			t.Errorf("segment %d: key %v, want synthesized", i, r.key)
		}
	}
	var p wire.MuxVideo
	if m := s.NextMessage(t, "task.mux_video", &p); m.TaskID != id || m.TraceID != "trace-123456" {
		t.Errorf("mux_video message %+v, want the task's, on the seed message's trace", m)
	}
	publishTTS(s, id, wire.TTS{SegmentIDs: []string{"seg-0", "seg-1"}})
	publishTTS(s, id, wire.TTS{SegmentIDs: []string{"seg-2"}})
	s.WaitFor("the batches' parts to be consumed", func() bool { return s.Depth("task.tts") == 0 })
	waitQuiet(s)
	if n := s.Depth("task.mux_video"); n != 0 {
		t.Errorf("%d more mux_video messages after the batches' parts, want exactly one in all", n)
	}
	if n := s.Depth("task.dlq"); n != 0 {
		t.Errorf("%d dead letters: the seed's message was refused", n)
	}
}
