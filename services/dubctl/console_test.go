package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

const consoleToken = "console-test-token-0123456789"

// The console binary, built once per test binary (by the first test that
// needs it) into the folder the test packages share.
var (
	consoleOnce sync.Once
	consoleDir  string
	consoleErr  error
)

// consoleBinary returns the path of the console binary, building it the
// first time.
func consoleBinary(t *testing.T) string {
	t.Helper()
	consoleOnce.Do(func() { consoleDir, consoleErr = testenv.SharedBinaries("console") })
	if consoleErr != nil {
		t.Fatalf("build console: %v", consoleErr)
	}
	return filepath.Join(consoleDir, "console")
}

// startConsole runs the real console binary on e's database, virtual host
// and bucket and returns its URL once it is ready.
func startConsole(t *testing.T, e *env) string {
	t.Helper()
	bin := consoleBinary(t)
	httpAddr, opsAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+e.db.URL, "AMQP_URL="+e.amqpURL,
		"S3_ENDPOINT="+e.bucket.Endpoint, "S3_ACCESS_KEY="+e.bucket.AccessKey, "S3_SECRET_KEY="+e.bucket.SecretKey,
		"S3_BUCKET="+e.bucket.Name, "CONSOLE_HTTP_ADDR="+httpAddr, "OPS_ADDR="+opsAddr,
		"DUBFLOW_API_TOKEN="+consoleToken, "DUBFLOW_API_READ_TOKEN=", "LOG_LEVEL=warn",
		// The stack's presign user may use only the stack's bucket.
		"S3_PRESIGN_ACCESS_KEY=", "S3_PRESIGN_SECRET_KEY=")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	testenv.WaitReady(t, "console", opsAddr, nil, func() string { return "(its log is on standard error)" })
	return "http://" + httpAddr
}

// throughConsole starts the console on e and points dubctl at it, with
// neither the database nor the broker set.
func throughConsole(t *testing.T, e *env) {
	t.Helper()
	url := startConsole(t, e)
	t.Setenv("DATABASE_URL", "")
	t.Setenv("AMQP_URL", "")
	t.Setenv("CONSOLE_URL", url)
	t.Setenv("DUBFLOW_API_TOKEN", consoleToken)
}

func TestDubctlThroughTheConsoleNeedsNoDatabase(t *testing.T) {
	e := setup(t)
	throughConsole(t, e)

	stdout, stderr, code := run(t, "submit", "--input", sample(t, media.SampleSpeech), "--target", "es", "--json")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	var task struct {
		TaskID uuid.UUID `json:"taskId"`
		Status string    `json:"status"`
	}
	if err := json.Unmarshal([]byte(stdout), &task); err != nil || task.Status != "queued" {
		t.Fatalf("submit --json: %v: %s", err, stdout)
	}
	msg := nextMessage(t, e, wire.QueueExtractAudio)
	if env, err := wire.Decode(msg.Body); err != nil || env.TaskID != task.TaskID {
		t.Fatalf("published %+v %v, want task %s", env, err, task.TaskID)
	}
	if out, _, code := run(t, "list"); code != 0 || !strings.Contains(out, task.TaskID.String()) {
		t.Fatalf("list: exit %d: %s", code, out)
	}
	if out, _, code := run(t, "status", task.TaskID.String()); code != 0 || !strings.Contains(out, "queued") {
		t.Fatalf("status: exit %d: %s", code, out)
	}
	if _, stderr, code := run(t, "status", uuid.NewString()); code != 1 || !strings.Contains(stderr, "no such task") {
		t.Fatalf("status of a missing task: exit %d: %s", code, stderr)
	}

	// A dead letter of the task, replayed through the console.
	env, _ := wire.New(wire.StepExtractAudio, task.TaskID, "", wire.ExtractAudio{
		SourceVideoKey: wire.DefaultKeys(task.TaskID).SourceVideo, OutputAudioKey: wire.DefaultKeys(task.TaskID).SourceAudio})
	body, _ := env.Marshal()
	var dl int64
	if err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO dead_letters (message_id, task_id, step, attempt,
		failure_reason, original_message) VALUES ('m1', $1, 'extract_audio', 1, 'boom', $2) RETURNING id`,
		task.TaskID, body).Scan(&dl); err != nil {
		t.Fatal(err)
	}
	if out, _, code := run(t, "dlq", "list"); code != 0 || !strings.Contains(out, "boom") {
		t.Fatalf("dlq list: exit %d: %s", code, out)
	}
	if out, stderr, code := run(t, "dlq", "replay", fmt.Sprint(dl)); code != 0 || !strings.Contains(out, "attempt 2") {
		t.Fatalf("dlq replay: exit %d: %s %s", code, out, stderr)
	}
	if env, err := wire.Decode(nextMessage(t, e, wire.QueueExtractAudio).Body); err != nil || env.Attempt != 2 {
		t.Fatalf("replayed %+v %v", env, err)
	}
	if _, stderr, code := run(t, "dlq", "replay", fmt.Sprint(dl)); code == 0 || !strings.Contains(stderr, "already replayed") {
		t.Fatalf("second replay: exit %d: %s", code, stderr)
	}
}

// nextMessage waits for a message in queue.
func nextMessage(t *testing.T, e *env, queue string) amqp.Delivery {
	t.Helper()
	ch := brokertest.Channel(t, e.amqpURL)
	var d amqp.Delivery
	testenv.EventuallyWithin(t, 15*time.Second, "a message in "+queue, func() bool {
		got, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		d = got
		return ok
	})
	return d
}

// TestDubctlWaitThroughTheConsoleShowsProgressAndDownloads: wait in console
// mode prints the task's progress and, once it is done, saves the dub and
// its subtitles through the console's presigned links.
func TestDubctlWaitThroughTheConsoleShowsProgressAndDownloads(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	srtKey := "outputs/" + id.String() + "/final.es.srt"
	objects, err := blob.New(config.S3{Endpoint: e.bucket.Endpoint, AccessKey: e.bucket.AccessKey,
		SecretKey: e.bucket.SecretKey, UseSSL: e.bucket.UseSSL, Bucket: e.bucket.Name})
	if err != nil {
		t.Fatal(err)
	}
	video, srt := "not really a video, but bytes", "1\n00:00:00,000 --> 00:00:01,000\nhola\n"
	for k, v := range map[string]string{keys.OutputVideo: video, srtKey: srt} {
		if err := objects.Put(ctx, k, strings.NewReader(v), int64(len(v)), "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key,
		output_video_key) VALUES ($1, 'running', 'en', 'es', $2, $3)`, id, keys.SourceVideo, keys.OutputVideo); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'extract_audio', 1, 'succeeded', now())`, id); err != nil {
		t.Fatal(err)
	}
	throughConsole(t, e)

	dest := filepath.Join(t.TempDir(), "out", "dub.mp4")
	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	go func() {
		o, e, c := run(t, "wait", id.String(), "--output", dest, "--timeout", "90s")
		done <- result{o, e, c}
	}()
	res := fmt.Sprintf(`{"output_video_key": %q, "subtitles": {"es": %q}}`, keys.OutputVideo, srtKey)
	if _, err := e.db.Pool.Exec(ctx, `UPDATE tasks SET status = 'done', result = $2, updated_at = now() WHERE id = $1`,
		id, res); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("wait: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "units done") {
		t.Fatalf("wait showed no progress on stderr: %q", r.stderr)
	}
	srtPath := filepath.Join(filepath.Dir(dest), "dub.es.srt")
	if !strings.Contains(r.stdout, "task "+id.String()+" done") || !strings.Contains(r.stdout, dest) || !strings.Contains(r.stdout, srtPath) {
		t.Fatalf("wait printed %q, want the task done and both paths", r.stdout)
	}
	for p, want := range map[string]string{dest: video, srtPath: srt} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Fatalf("%s: %q %v, want %q", p, b, err, want)
		}
	}
}

// TestDubctlStatusThroughTheConsoleShowsTheLanguages: status in console
// mode prints a parent's languages and children, and a child's parent, the
// block database mode prints.
func TestDubctlStatusThroughTheConsoleShowsTheLanguages(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	parent := uuid.New()
	es, ca := wire.ChildTaskID(parent, "es"), wire.ChildTaskID(parent, "ca")
	keys := wire.DefaultKeys(parent)
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key,
		output_video_key, targets) VALUES ($1, 'running', 'en', 'es', $2, $3, '{es,ca}')`,
		parent, keys.SourceVideo, keys.OutputVideo); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id             uuid.UUID
		lang, status   string
		output, errMsg string
	}{{es, "es", "done", "outputs/" + es.String() + "/final.mp4", ""}, {ca, "ca", "failed", "outputs/" + ca.String() + "/final.mp4", "tts: no voice for ca"}} {
		if _, err := e.db.Pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key,
			output_video_key, parent_task_id, error) VALUES ($1, $2, 'en', $3, $4, $5, $6, $7)`,
			c.id, c.status, c.lang, wire.DefaultKeys(c.id).SourceVideo, c.output, parent, c.errMsg); err != nil {
			t.Fatal(err)
		}
	}
	throughConsole(t, e)

	out, stderr, code := run(t, "status", parent.String())
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	t.Logf("status of the parent:\n%s", out)
	for _, want := range []string{"targets   es, ca", "LANGUAGE", es.String(), ca.String(),
		"outputs/" + es.String() + "/final.mp4", "tts: no voice for ca", "STEP"} {
		if !strings.Contains(out, want) {
			t.Errorf("status of the parent lacks %q:\n%s", want, out)
		}
	}
	// The failed child's output is no output: "-", as in database mode.
	if strings.Contains(out, "outputs/"+ca.String()) {
		t.Errorf("status shows the failed child's output key:\n%s", out)
	}
	out, stderr, code = run(t, "status", es.String())
	if code != 0 {
		t.Fatalf("status of a child: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "parent    "+parent.String()) {
		t.Errorf("status of a child does not name its parent:\n%s", out)
	}
}
