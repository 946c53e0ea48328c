package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// fixtures finds the shared speech fixtures: $DUBFLOW_FIXTURES, or
// shared/fixtures/speech beside the repository.
func fixtures(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("DUBFLOW_FIXTURES"); dir != "" {
		return dir
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		candidate := filepath.Join(dir, "shared", "fixtures", "speech")
		if _, err := os.Stat(filepath.Join(candidate, "jfk.wav")); err == nil {
			return candidate
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("speech fixtures not found: set DUBFLOW_FIXTURES or put shared/fixtures/speech beside the repository")
		}
		dir = parent
	}
}

// newTask creates a task whose extract_audio step succeeded, with its audio
// (a local WAV file) stored, and returns the asr message for it.
func newTask(s *testenv.Stack, wav string) *wire.Envelope {
	s.T.Helper()
	ctx := context.Background()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language)
		VALUES ($1, 'running', 'en', 'es')`, id); err != nil {
		s.T.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'extract_audio', 1, 'succeeded', now())`, id); err != nil {
		s.T.Fatal(err)
	}
	if err := s.Blob.PutFile(ctx, keys.SourceAudio, wav, "audio/wav"); err != nil {
		s.T.Fatal(err)
	}
	env, err := wire.New(wire.StepASR, id, "", wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
	if err != nil {
		s.T.Fatal(err)
	}
	return env
}

// TestASR runs one worker (starting a stack costs seconds) on real speech
// and on silence.
func TestASR(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, run, map[string]string{"TRANSLATE_BATCH_SIZE": "3"})
	s.Start()
	t.Run("speech becomes segments, asr.json and translate batches", func(t *testing.T) { speechToSegments(t, s) })
	t.Run("silence fails the task: no speech found", func(t *testing.T) { silenceIsNoSpeech(t, s) })
}

func speechToSegments(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	env := newTask(s, filepath.Join(fixtures(t), "jfk.wav"))
	id := env.TaskID
	s.Publish(env)
	if got := s.WaitStep(id, wire.StepASR, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("asr %s: %+v", got, s.Task(id))
	}

	type seg struct {
		Idx, StartMS, EndMS int
		Text                string
	}
	var segs []seg
	rows, err := s.DB.Pool.Query(ctx, `SELECT idx, start_ms, end_ms, src_text FROM segments
		WHERE task_id = $1 AND mt_text IS NULL ORDER BY idx`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r seg
		if err := rows.Scan(&r.Idx, &r.StartMS, &r.EndMS, &r.Text); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(segs) < 2 {
		t.Fatalf("segments = %+v, want the speech split into several", segs)
	}
	var all []string
	for i, r := range segs {
		if r.Idx != i || r.Text == "" || r.EndMS <= r.StartMS || r.EndMS > 11000 || (i > 0 && r.StartMS < segs[i-1].EndMS) {
			t.Errorf("segment %d = %+v", i, r)
		}
		all = append(all, r.Text)
	}
	if text := strings.Join(all, " "); !strings.Contains(text, "country") {
		t.Errorf("recognised %q; JFK's line has \"country\" in it", text)
	}

	doc, raw := readTranscript(ctx, t, s, id)
	if doc.TaskID != id || doc.Language != "en" || len(doc.Segments) != len(segs) {
		t.Fatalf("asr.json = %s", raw)
	}
	for i, ds := range doc.Segments {
		if ds.ID != wire.SegmentID(i) || ds.Text != segs[i].Text || ds.StartMS != segs[i].StartMS ||
			ds.Start != float64(segs[i].StartMS)/1000 || len(ds.Words) == 0 {
			t.Errorf("asr.json segment %d = %+v, row %+v", i, ds, segs[i])
		}
	}

	// One translate message per batch of 3, in order, covering every segment.
	var got []string
	for want := (len(segs) + 2) / 3; want > 0; want-- {
		var p wire.Translate
		m := s.NextMessage(t, "task.translate", &p)
		if m.TaskID != id || m.TraceID != env.TraceID || p.SourceLanguage != "en" || p.TargetLanguage != "es" ||
			p.BatchSize != 3 || len(p.SegmentIDs) > 3 {
			t.Errorf("translate message %+v payload %+v", m, p)
		}
		got = append(got, p.SegmentIDs...)
	}
	var want []string
	for i := range segs {
		want = append(want, wire.SegmentID(i))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || s.Depth("task.translate") != 0 {
		t.Errorf("translate batches carry %v (and %d more messages), want %v", got, s.Depth("task.translate"), want)
	}
	var parts int
	if err := s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM step_parts WHERE task_id = $1 AND step = 'translate'`, id).Scan(&parts); err != nil || parts != (len(segs)+2)/3 {
		t.Errorf("%d translate parts registered (err %v)", parts, err)
	}
}

// silenceIsNoSpeech: audio without speech fails its task with "asr: no
// speech found in the audio" (event.task.failed), without translate
// messages or dead letters; asr.json records no segments.
func silenceIsNoSpeech(t *testing.T, s *testenv.Stack) {
	wav := filepath.Join(t.TempDir(), "silence.wav")
	f, err := os.Create(wav)
	if err != nil {
		t.Fatal(err)
	}
	w, err := media.NewWAVWriter(f, 16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSilence(3 * 16000); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	translates := s.Depth("task.translate")
	env := newTask(s, wav)
	s.Publish(env)
	if got := s.WaitStep(env.TaskID, wire.StepASR, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("asr %s: %+v", got, s.Task(env.TaskID))
	}
	// Nothing to dub: the task fails saying so (not done without a video),
	// and the asr step itself succeeded — nothing is dead-lettered.
	task := s.Task(env.TaskID)
	if task.Status != "failed" || task.Error != "asr: no speech found in the audio" {
		t.Errorf("task = %+v, want failed: asr: no speech found in the audio", task)
	}
	ev, err := wire.DecodeEvent(s.Next(s.Events, 10e9))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Event != wire.EventTaskFailed || ev.TaskID != env.TaskID || ev.Status != "failed" ||
		ev.Error != "asr: no speech found in the audio" || ev.Step != wire.StepASR {
		t.Errorf("event = %+v", ev)
	}
	if n := s.Depth(wire.QueueDLQ); n != 0 {
		t.Errorf("%d dead letters for silence", n)
	}
	if n := s.Depth("task.translate") - translates; n != 0 {
		t.Errorf("%d translate messages for silence", n)
	}
	raw, err := s.Blob.Get(context.Background(), wire.DefaultKeys(env.TaskID).ASR, 1<<20)
	if err != nil || !strings.Contains(string(raw), `"segments":[]`) {
		t.Errorf("asr.json = %s (err %v), want no segments", raw, err)
	}
}

// readTranscript reads and decodes the task's asr.json.
func readTranscript(ctx context.Context, t *testing.T, s *testenv.Stack, id uuid.UUID) (transcript, []byte) {
	t.Helper()
	raw, err := s.Blob.Get(ctx, wire.DefaultKeys(id).ASR, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var doc transcript
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("asr.json: %v\n%s", err, raw)
	}
	return doc, raw
}
