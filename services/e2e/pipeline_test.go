package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/dubflow/dubflow/pkg/testenv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	amqp "github.com/rabbitmq/amqp091-go"
)

// sampleText lasts about 7 s when espeak-ng speaks it.
const sampleText = "Good morning everyone. Today we are going to talk about the weather. " +
	"It will be sunny in the afternoon."

// sampleLead is the silence before and after the speech of the samples.
const sampleLead = 500 * time.Millisecond

// TestPipeline runs the five workers and the DLQ recorder as processes and
// dubs through them: bad inputs first (each must end clearly), then a good
// video through dubctl, then the seed's own extract_audio example published
// straight to task_exchange.
func TestPipeline(t *testing.T) {
	t.Parallel() // each test runs its own stack (database, virtual host, bucket, processes)
	s := newStack(t, nil)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.mp4")
	if err := media.MakeSampleVideo(ctx, sampleText, good, media.SampleOptions{Lead: sampleLead}); err != nil {
		t.Fatal(err)
	}

	t.Run("bad inputs", func(t *testing.T) { testBadInputs(t, ctx, s, dir) })
	t.Run("dubctl submit", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "good.dubbed.mp4")
		stdout, stderr, code := s.dubctl(t, ctx, "submit", "--input", good, "--source", "en", "--target", "es",
			"--wait", "--output", out, "--json", "--timeout", "3m")
		v := decodeTask(t, stdout, stderr)
		if code != 0 {
			t.Fatalf("dubctl submit --wait: exit %d, task %s %s: %s\n%s", code, v.TaskID, v.Status, v.Error, stderr)
		}
		if v.OutputPath != out {
			t.Errorf("output path %q, want %q", v.OutputPath, out)
		}
		s.checkDubbed(t, ctx, v, good, out, sampleLead, duration(t, ctx, good)-sampleLead)
		// status --json reports the same task with every step succeeded.
		stdout, stderr, code = s.dubctl(t, ctx, "status", v.TaskID.String(), "--json")
		st := decodeTask(t, stdout, stderr)
		if code != 0 || st.Status != "done" || len(st.Steps) != len(workers) {
			t.Fatalf("status: exit %d, %+v", code, st)
		}
		for _, step := range st.Steps {
			if step.Status != "succeeded" || step.Attempts < 1 || step.StartedAt == nil || step.FinishedAt == nil {
				t.Errorf("status: step %+v, want succeeded with times", step)
			}
		}
		if st.Segments.Total == 0 || st.Segments.Translated != st.Segments.Total || st.Segments.Synthesized != st.Segments.Total {
			t.Errorf("status: segments %+v, want all translated and synthesized", st.Segments)
		}
	})
	t.Run("seed message", func(t *testing.T) { testSeedMessage(t, ctx, s, good) })
}

// testBadInputs submits every bad input at once, then checks that each
// ended clearly.
func testBadInputs(t *testing.T, ctx context.Context, s *stack, dir string) {
	text := filepath.Join(dir, "notes.mp4")
	if err := os.WriteFile(text, []byte("these are meeting notes, not a video\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	disguised := disguisedText(t, dir)
	samples := map[string]media.SampleKind{"noaudio": media.SampleNoAudio, "silent": media.SampleSilent,
		"truncated": media.SampleTruncatedIndex}
	paths := map[string]string{}
	for name, kind := range samples {
		p := filepath.Join(dir, name+".mp4")
		if err := media.MakeSampleVideo(ctx, sampleText, p, media.SampleOptions{Kind: kind}); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}

	// dubctl refuses a non-media file by itself, before creating a task:
	// pkg/admit's refusal, a usage error (exit 2) as every refused input.
	_, stderr, code := s.dubctl(t, ctx, "submit", "--input", text)
	if code != 2 || !strings.Contains(stderr, "video: not a media file") {
		t.Errorf("dubctl submit of a text file: exit %d, stderr %q; want 2 and \"video: not a media file\"", code, stderr)
	}

	cases := []struct {
		name, input string
		noValidate  bool
		wantStatus  string
		wantError   string
	}{
		{"text behind a container's signature", disguised, true, "failed", "not a media file"},
		{"no audio track", paths["noaudio"], true, "failed", "no audio stream"},
		{"truncated", paths["truncated"], true, "failed", "truncated"},
		// No speech, nothing to dub: a failure that says so (issue 47).
		{"silent", paths["silent"], false, "failed", "asr: no speech found in the audio"},
	}
	ids := make([]uuid.UUID, len(cases))
	for i, c := range cases {
		args := []string{"submit", "--input", c.input}
		if c.noValidate {
			args = append(args, "--no-validate")
		}
		stdout, stderr, code := s.dubctl(t, ctx, args...)
		if code != 0 {
			t.Fatalf("%s: dubctl submit: exit %d: %s", c.name, code, stderr)
		}
		id, err := uuid.Parse(strings.TrimSpace(stdout))
		if err != nil {
			t.Fatalf("%s: dubctl submit printed %q, want a task id", c.name, stdout)
		}
		ids[i] = id
	}
	dotdot := publishTraversal(t, ctx, s)

	for i, c := range cases {
		v, code := s.waitTask(t, ctx, ids[i], "", 2*time.Minute)
		if v.Status != c.wantStatus {
			t.Errorf("%s: task %s, error %q; want %s", c.name, v.Status, v.Error, c.wantStatus)
			continue
		}
		switch c.wantStatus {
		case "failed":
			if code != 1 || !strings.Contains(v.Error, c.wantError) {
				t.Errorf("%s: exit %d, error %q; want 1 and an error naming %q", c.name, code, v.Error, c.wantError)
			}
		case "done":
			var r struct {
				NoSpeech bool `json:"no_speech"`
			}
			_ = json.Unmarshal(v.Result, &r)
			if code != 0 || !r.NoSpeech {
				t.Errorf("%s: exit %d, result %s; want 0 and no_speech", c.name, code, v.Result)
			}
		}
	}
	v, code := s.waitTask(t, ctx, dotdot, "", 2*time.Minute)
	if v.Status != "failed" || code != 1 || !strings.Contains(v.Error, "..") {
		t.Errorf("key with '..': task %s (exit %d), error %q; want failed naming '..'", v.Status, code, v.Error)
	}
}

// publishTraversal creates a task whose extract_audio message names a key
// with "..", the way a hostile or broken producer would, and returns its id.
func publishTraversal(t *testing.T, ctx context.Context, s *stack) uuid.UUID {
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	bad := "videos/" + id.String() + "/../" + id.String() + "/source.mp4"
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO tasks (id, source_language, target_language, source_video_key,
		output_video_key, trace_id) VALUES ($1, 'en', 'es', $2, $3, 'trace-dotdot')`, id, bad, keys.OutputVideo); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{
		"task_id": id, "step": "extract_audio", "attempt": 1, "trace_id": "trace-dotdot",
		"created_at": time.Now().UTC().Format(time.RFC3339),
		"payload":    map[string]string{"source_video_key": bad, "output_audio_key": keys.SourceAudio},
	})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, ctx, s, "task.extract_audio", body)
	return id
}

// publish sends body to task_exchange as an outside producer would.
func publish(t *testing.T, ctx context.Context, s *stack, key string, body []byte) {
	t.Helper()
	conn, err := amqp.Dial(s.env["AMQP_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, wire.Exchange, key, true, false,
		amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := conf.WaitContext(ctx); err != nil || !ok {
		t.Fatalf("publish %s: confirmed %v, %v", key, ok, err)
	}
}

// testSeedMessage publishes the seed's extract_audio example as it is (a
// fresh database and bucket, so its fixed task id is free): no task row, no
// dubctl. extract_audio creates the task and the chain dubs it.
func testSeedMessage(t *testing.T, ctx context.Context, s *stack, video string) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(filepath.Join(root, "proto", "examples", "extract_audio.json"))
	if err != nil {
		t.Fatal(err)
	}
	env, err := wire.Decode(body)
	if err != nil {
		t.Fatalf("seed example: %v", err)
	}
	var p wire.ExtractAudio
	if err := env.UnmarshalPayload(&p); err != nil {
		t.Fatal(err)
	}
	if p.SourceVideoKey != wire.DefaultKeys(env.TaskID).SourceVideo {
		t.Fatalf("seed example's key %q is not videos/{id}/source.mp4", p.SourceVideoKey)
	}
	if _, err := s.bucket.Client.FPutObject(ctx, s.bucket.Name, p.SourceVideoKey, video,
		minio.PutObjectOptions{ContentType: "video/mp4"}); err != nil {
		t.Fatal(err)
	}
	publish(t, ctx, s, "task.extract_audio", body)

	// extract_audio creates the row; wait for it, then follow it.
	end, _ := ctx.Deadline()
	if !testenv.Poll(end, func() bool {
		var status string
		err := s.db.Pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, env.TaskID).Scan(&status)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) && ctx.Err() == nil {
			t.Fatal(err)
		}
		return err == nil
	}) {
		t.Fatalf("no task row for the seed message %s: %v", env.TaskID, ctx.Err())
	}
	out := filepath.Join(t.TempDir(), "seed.dubbed.mp4")
	v, code := s.waitTask(t, ctx, env.TaskID, out, 3*time.Minute)
	if code != 0 {
		t.Fatalf("seed task: exit %d, %s: %s", code, v.Status, v.Error)
	}
	s.checkDubbed(t, ctx, v, video, out, sampleLead, duration(t, ctx, video)-sampleLead)
}

// duration is the container duration of a media file.
func duration(tb testing.TB, ctx context.Context, path string) time.Duration {
	tb.Helper()
	info, err := media.Probe(ctx, path)
	if err != nil {
		tb.Fatal(err)
	}
	return info.Duration
}

// disguisedText writes meeting notes behind an Ogg page's signature: the
// door's ffprobe-free check (dubctl --no-validate: admit.Limits.File) lets
// it through as a container it knows, and the worker's ffprobe refuses it
// as not a media file. A plain text file is refused at the door already.
func disguisedText(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "disguised.mp4")
	if err := os.WriteFile(p, []byte("OggS these are meeting notes, not a video\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
