package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// The read model's shapes as dubctl names them; `status --json`,
// `wait --json` and `list --json` print them as the console's API does.
type (
	taskView      = view.Task
	taskSummary   = view.Summary
	segmentCounts = view.SegmentCounts
)

// env is a fresh database, virtual host and bucket, exported for dubctl.
type env struct {
	db      *testenv.Database
	amqpURL string
	bucket  *testenv.Bucket
}

// TestMain keeps go test's -parallel (most tests set the environment
// dubctl reads, so they cannot run in parallel) and removes what ended
// tests leave behind in the background.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 0))
}

func setup(t *testing.T) *env {
	t.Helper()
	b := testenv.NewBackends(t)
	for k, v := range b.Env(nil) {
		t.Setenv(k, v)
	}
	return &env{db: b.DB, amqpURL: b.AMQPURL, bucket: b.Bucket}
}

// submitted returns the message submit published on task.extract_audio.
func (e *env) submitted(t *testing.T) *wire.Envelope {
	t.Helper()
	msg, ok, err := testenv.Channel(t, e.amqpURL).Get(wire.QueueExtractAudio, true)
	if err != nil || !ok {
		t.Fatalf("no message on %s (%v)", wire.QueueExtractAudio, err)
	}
	env, err := wire.Decode(msg.Body)
	if err != nil {
		t.Fatalf("published message %s: %v", msg.Body, err)
	}
	return env
}

// run executes dubctl in-process.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = execute(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

func sample(t *testing.T, kind media.SampleKind) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sample.mp4")
	if err := media.MakeSampleVideo(context.Background(), "Hello world.", p, media.SampleOptions{Kind: kind}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSubmitCreatesTaskUploadsAndPublishes(t *testing.T) {
	e := setup(t)
	video := sample(t, media.SampleSpeech)
	stdout, stderr, code := run(t, "submit", "--input", video, "--source", "en", "--target", "es",
		"--speaker", "es+f3", "--json")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	var v taskView
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("submit --json: %v: %s", err, stdout)
	}
	keys := wire.DefaultKeys(v.TaskID)
	if v.Status != view.Queued || v.SourceLanguage != "en" || v.TargetLanguage != "es" || v.SpeakerID != "es+f3" ||
		v.SourceVideoKey != keys.SourceVideo || v.OutputVideoKey != keys.OutputVideo || v.TraceID == "" {
		t.Errorf("task %+v", v)
	}
	if len(v.Steps) != len(wire.Pipeline) || v.Steps[0].Status != "pending" {
		t.Errorf("steps %+v, want every pipeline step pending", v.Steps)
	}
	ctx := context.Background()
	info, err := e.bucket.Client.StatObject(ctx, e.bucket.Name, keys.SourceVideo, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("uploaded video: %v", err)
	}
	if fi, _ := os.Stat(video); info.Size != fi.Size() {
		t.Errorf("uploaded %d bytes, file has %d", info.Size, fi.Size())
	}
	var outbox int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&outbox); err != nil || outbox != 0 {
		t.Errorf("outbox rows left: %d (%v), want 0 after the flush", outbox, err)
	}

	env := e.submitted(t)
	var p wire.ExtractAudio
	if err := env.UnmarshalPayload(&p); err != nil {
		t.Fatal(err)
	}
	want := wire.ExtractAudio{SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio,
		SourceLanguage: "en", TargetLanguage: "es", SpeakerID: "es+f3", Project: "default"}
	if env.TaskID != v.TaskID || env.Attempt != 1 || env.TraceID != v.TraceID || !reflect.DeepEqual(p, want) {
		t.Errorf("message %+v payload %+v, want task %s attempt 1 trace %s payload %+v", env, p, v.TaskID, v.TraceID, want)
	}
}

func TestSubmitRejectsBadInputLocally(t *testing.T) {
	e := setup(t)
	text := filepath.Join(t.TempDir(), "notes.mp4")
	if err := os.WriteFile(text, []byte("not a video\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ input, want string }{
		{text, "not a media file"},
		{sample(t, media.SampleNoAudio), "no audio stream"},
		{filepath.Join(t.TempDir(), "missing.mp4"), "no such file"},
	}
	for _, c := range cases {
		_, stderr, code := run(t, "submit", "--input", c.input)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("submit %s: exit %d, stderr %q; want an error line naming %q", filepath.Base(c.input), code, stderr, c.want)
		}
	}
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d tasks created (%v), want none", n, err)
	}
}

func TestUnreachableServicesNameTheRedactedURL(t *testing.T) {
	e := setup(t)
	video := sample(t, media.SampleSpeech)
	t.Setenv("DATABASE_URL", "postgres://dubflow:hunter2@127.0.0.1:1/dubflow?sslmode=disable")
	_, stderr, code := run(t, "list")
	if code != cli.ExitFailed || !strings.Contains(stderr, "postgres://dubflow:xxxxx@127.0.0.1:1/dubflow") ||
		strings.Contains(stderr, "hunter2") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("list with the database down: exit %d, stderr %q", code, stderr)
	}

	t.Setenv("DATABASE_URL", e.db.URL)
	t.Setenv("AMQP_URL", "amqp://guest:hunter2@127.0.0.1:1/")
	_, stderr, code = run(t, "submit", "--input", video)
	if code != cli.ExitFailed || !strings.Contains(stderr, "amqp://guest:xxxxx@127.0.0.1:1/") || strings.Contains(stderr, "hunter2") {
		t.Errorf("submit with the broker down: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("AMQP_URL", e.amqpURL)
	t.Setenv("S3_ENDPOINT", "127.0.0.1:1")
	_, stderr, code = run(t, "submit", "--input", video)
	if code != cli.ExitFailed || !strings.Contains(stderr, "http://127.0.0.1:1/") {
		t.Errorf("submit with the object store down: exit %d, stderr %q", code, stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"wait", "not-a-uuid"},
		{"status"},
		{"list", "--status", "bogus"},
		{"submit"},
		{"submit", "--input", "x.mp4", "--bogus"},
		{"frobnicate"},
	} {
		_, stderr, code := run(t, args...)
		if code != cli.ExitUsage || stderr == "" {
			t.Errorf("dubctl %v: exit %d, stderr %q; want %d and a message", args, code, stderr, cli.ExitUsage)
		}
	}
}

// insertTask adds a task row in the given state.
func insertTask(t *testing.T, e *env, status, errText, result string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	_, err := e.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status, source_language,
		target_language, source_video_key, output_video_key, error, result, trace_id)
		VALUES ($1, $2, 'en', 'es', $3, $4, $5, $6, 'trace-test')`, id, status, keys.SourceVideo, keys.OutputVideo, errText, result)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestWaitOutcomes(t *testing.T) {
	e := setup(t)
	ctx := context.Background()

	failed := insertTask(t, e, view.Failed, "extract_audio: no audio stream in source.mp4", "{}")
	_, stderr, code := run(t, "wait", failed.String())
	if code != cli.ExitFailed || !strings.Contains(stderr, "no audio stream") {
		t.Errorf("wait on a failed task: exit %d, stderr %q", code, stderr)
	}
	stdout, _, code := run(t, "wait", failed.String(), "--json")
	var v taskView
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || code != cli.ExitFailed || v.Status != view.Failed || v.Error == "" {
		t.Errorf("wait --json on a failed task: exit %d, %v, %s", code, err, stdout)
	}

	cancelled := insertTask(t, e, view.Cancelled, "cancelled: not wanted", "{}")
	_, stderr, code = run(t, "wait", cancelled.String(), "--timeout", "20s")
	if code != cli.ExitFailed || !strings.Contains(stderr, "was cancelled: not wanted") {
		t.Errorf("wait on a cancelled task: exit %d, stderr %q", code, stderr)
	}

	comp := insertTask(t, e, view.Compensating, "", "{}")
	_, stderr, code = run(t, "wait", comp.String())
	if code != cli.ExitCompensated || !strings.Contains(stderr, "tts_requeue") {
		t.Errorf("wait on a compensating task: exit %d, stderr %q", code, stderr)
	}

	running := insertTask(t, e, view.Running, "", "{}")
	_, stderr, code = run(t, "wait", running.String(), "--timeout", "600ms")
	if code != cli.ExitTimeout || !strings.Contains(stderr, "still running") {
		t.Errorf("wait on a running task: exit %d, stderr %q", code, stderr)
	}

	_, stderr, code = run(t, "wait", uuid.NewString())
	if code != cli.ExitFailed || !strings.Contains(stderr, "no such task") {
		t.Errorf("wait on an unknown task: exit %d, stderr %q", code, stderr)
	}

	quiet := insertTask(t, e, view.Done, "", `{"no_speech": true}`)
	stdout, stderr, code = run(t, "wait", quiet.String())
	if code != cli.ExitOK || !strings.Contains(stdout, "no speech") {
		t.Errorf("wait on a no-speech task: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// A done task: the video and both SRTs are downloaded.
	done := insertTask(t, e, view.Done, "", "{}")
	keys := wire.DefaultKeys(done)
	srt := "1\n00:00:00,500 --> 00:00:02,000\nHola\n"
	for key, body := range map[string]string{keys.OutputVideo: "fake mp4 bytes",
		"outputs/" + done.String() + "/final.es.srt": srt, "outputs/" + done.String() + "/final.en.srt": srt} {
		if _, err := e.bucket.Client.PutObject(ctx, e.bucket.Name, key, strings.NewReader(body), int64(len(body)),
			minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "sub", "dubbed.mp4")
	stdout, stderr, code = run(t, "wait", done.String(), "--output", out)
	if code != cli.ExitOK {
		t.Fatalf("wait on a done task: exit %d: %s", code, stderr)
	}
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); lines[len(lines)-1] != out {
		t.Errorf("last line %q, want the output path %s", lines[len(lines)-1], out)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != "fake mp4 bytes" {
		t.Errorf("output: %q, %v", data, err)
	}
	for _, lang := range []string{"es", "en"} {
		p := strings.TrimSuffix(out, ".mp4") + "." + lang + ".srt"
		if data, err := os.ReadFile(p); err != nil || string(data) != srt {
			t.Errorf("subtitle %s: %q, %v", p, data, err)
		}
	}
}

// The output download is bounded by the workers' limits: an output larger
// than MAX_VIDEO_BYTES+MAX_AUDIO_BYTES is refused with the settings named,
// and nothing is left on disk.
func TestWaitRefusesAnOutputOverTheLimits(t *testing.T) {
	e := setup(t)
	t.Setenv("MAX_VIDEO_BYTES", "600")
	t.Setenv("MAX_AUDIO_BYTES", "400")
	done := insertTask(t, e, view.Done, "", "{}")
	body := strings.Repeat("x", 1001)
	if _, err := e.bucket.Client.PutObject(context.Background(), e.bucket.Name, wire.DefaultKeys(done).OutputVideo,
		strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "dubbed.mp4")
	_, stderr, code := run(t, "wait", done.String(), "--output", out)
	if code == cli.ExitOK || !strings.Contains(stderr, "MAX_VIDEO_BYTES+MAX_AUDIO_BYTES") || !strings.Contains(stderr, "limit 1000 bytes") {
		t.Fatalf("wait on a done task with a 1001-byte output: exit %d, stderr %q; want a refusal naming the limit", code, stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left in the output folder", len(left))
	}
}

func TestStatusReportsStepsAndSegments(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	id := insertTask(t, e, view.Running, "", "{}")
	for _, q := range []string{`
		INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at, error) VALUES
		($1, 'extract_audio', '', 1, 'failed', 'w1', now() - interval '10 s', now() - interval '9 s', 'download: timeout'),
		($1, 'extract_audio', '', 2, 'succeeded', 'w1', now() - interval '8 s', now() - interval '7 s', ''),
		($1, 'asr', '', 1, 'succeeded', 'w2', now() - interval '7 s', now() - interval '5 s', ''),
		($1, 'translate', 'seg-0', 1, 'succeeded', 'w3', now() - interval '5 s', now() - interval '4 s', ''),
		($1, 'translate', 'seg-2', 1, 'running', 'w3', now() - interval '4 s', NULL, '')`,
		`INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', 'seg-0'), ($1, 'translate', 'seg-2')`,
		`INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key, tts_failures) VALUES
		($1, 0, 0, 1000, 'hello', 'hola', 'tts/x/seg-000000.wav', 0),
		($1, 1, 1000, 2000, 'world', 'mundo', NULL, 2),
		($1, 2, 2000, 3000, 'again', NULL, NULL, 0)`} {
		if _, err := e.db.Pool.Exec(ctx, q, id); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code := run(t, "status", id.String(), "--json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var v taskView
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status   string
		attempts int
	}{"extract_audio": {"succeeded", 2}, "asr": {"succeeded", 1}, "translate": {"running", 2},
		"tts": {"pending", 0}, "mux_video": {"pending", 0}}
	for _, s := range v.Steps {
		if w := want[s.Step]; s.Status != w.status || s.Attempts != w.attempts {
			t.Errorf("step %s: %s with %d attempts, want %s with %d", s.Step, s.Status, s.Attempts, w.status, w.attempts)
		}
	}
	var attempts []view.Attempt
	for _, s := range v.Steps {
		for _, p := range s.Parts {
			attempts = append(attempts, p.Attempts...)
		}
	}
	if len(attempts) != 5 || attempts[0].Error != "download: timeout" {
		t.Errorf("attempts %+v", attempts)
	}
	if v.Segments != (segmentCounts{Total: 3, Translated: 2, Synthesized: 1, FailedTTS: 1}) {
		t.Errorf("segments %+v", v.Segments)
	}
	// The text form names the same things.
	stdout, _, code = run(t, "status", id.String())
	for _, s := range []string{"running", "download: timeout", "3 total, 2 translated, 1 synthesized, 1 failed"} {
		if code != 0 || !strings.Contains(stdout, s) {
			t.Errorf("status text lacks %q:\n%s", s, stdout)
		}
	}
	// list shows it.
	stdout, _, code = run(t, "list", "--status", "running", "--json")
	var tasks []taskSummary
	if err := json.Unmarshal([]byte(stdout), &tasks); err != nil || code != 0 || len(tasks) != 1 || tasks[0].TaskID != id {
		t.Errorf("list --status running: exit %d, %v, %s", code, err, stdout)
	}
}
