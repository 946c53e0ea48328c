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

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/engine"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// upload stores a local file under key.
func upload(s *testenv.Stack, key, path string) {
	s.T.Helper()
	if err := s.Blob.PutFile(context.Background(), key, path, "video/mp4"); err != nil {
		s.T.Fatal(err)
	}
}

// sample makes a sample video of kind speaking text.
func sample(t *testing.T, text string, kind media.SampleKind) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sample.mp4")
	if err := media.MakeSampleVideo(context.Background(), text, out, media.SampleOptions{Kind: kind}); err != nil {
		t.Fatal(err)
	}
	return out
}

// seedMessage is the seed specification's example message for a task: the
// two keys and nothing else.
func seedMessage(t *testing.T, id uuid.UUID) *wire.Envelope {
	t.Helper()
	keys := wire.DefaultKeys(id)
	env, err := wire.New(wire.StepExtractAudio, id, "trace-"+id.String()[:8], wire.ExtractAudio{
		SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio,
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestExtractAudio runs one worker (starting a stack costs seconds) through
// every case: the seed's message, the language fallbacks, bad inputs.
func TestExtractAudio(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, run, map[string]string{
		"MAX_VIDEO_SECONDS": "6", "DEFAULT_SOURCE_LANGUAGE": "en", "DEFAULT_TARGET_LANGUAGE": "de",
	})
	s.Start()
	t.Run("seed message creates the task and extracts audio", func(t *testing.T) { seedMessageCreatesTask(t, s) })
	t.Run("languages from payload, then task, then defaults", func(t *testing.T) { languagesFallBack(t, s) })
	t.Run("bad inputs fail the task with a clear reason", func(t *testing.T) { badInputsFail(t, s) })
	t.Run("the door's probe is reused for the same bytes only", func(t *testing.T) { doorProbeReused(t, s) })
	t.Run("subtitles in the source skip asr", func(t *testing.T) { subtitlesInTheSource(t, s) })
	t.Run("subtitles in the target skip asr and translate", func(t *testing.T) { subtitlesInTheTarget(t, s) })
	t.Run("bad subtitles fail the task with the doors' text", func(t *testing.T) { badSubtitlesRefused(t, s) })
	t.Run("a rebuilt message keeps the plan's subtitles", func(t *testing.T) { rebuiltMessageKeepsThePlan(t, s) })
	t.Run("an unknown project is dead-lettered", func(t *testing.T) { unknownProjectRefused(t, s) })
	// Last: it announces engines, which the cases above do not expect.
	t.Run("impossible languages are refused at once", func(t *testing.T) { impossibleLanguagesRefused(t, s) })
}

// impossibleLanguagesRefused: an outside publisher's message naming a
// target no engine can do, a speaker no tts engine has, or a glossary the
// doors would refuse (a bidirectional override, an escape, a source term
// twice), is dead-lettered on its first attempt with the admission's text
// (pkg/admit), before any audio is extracted or any asr runs; a possible
// one still passes.
func impossibleLanguagesRefused(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	caps := admit.Capabilities{}
	for _, c := range []engine.Capability{
		{Step: wire.StepASR, Worker: "asr-1", Engine: "pocketsphinx", Languages: []string{"en"}},
		{Step: wire.StepTranslate, Worker: "translate-1", Engine: "apertium", Languages: []string{"en|es", "es|en"}},
		{Step: wire.StepTTS, Worker: "tts-1", Engine: "espeak", Languages: []string{"en", "es"}, Voices: []string{"en", "es", "+m3"}},
	} {
		if err := engine.Announce(ctx, s.DB.Pool, c); err != nil {
			t.Fatal(err)
		}
		caps = append(caps, c)
	}
	video := sample(t, "Hello there.", media.SampleSpeech)
	for _, c := range []struct {
		name, source, target, speaker string
		glossary                      []wire.Term
	}{
		{"target xx", "en", "xx", "", nil}, {"target tlh", "en", "tlh", "", nil}, {"source zz", "zz", "es", "", nil},
		{"source = target", "es", "es", "", nil},
		{"speaker zz9+nonexistent", "en", "es", "zz9+nonexistent", nil},
		{"glossary with a right-to-left override", "en", "es", "", []wire.Term{{Source: "try", Target: "pro\u202ebar"}}},
		{"glossary with an escape", "en", "es", "", []wire.Term{{Source: "a\x1b[31mred"}}},
		{"glossary with a term twice", "en", "es", "", []wire.Term{{Source: "Try", Target: "a"}, {Source: "x"}, {Source: "try", Target: "b"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := admit.Glossary(c.glossary)
			if want == nil {
				want = admit.Languages(c.source, []string{c.target}, caps)
			}
			if want == nil {
				want = admit.Speaker(c.speaker, caps)
			}
			if want == nil {
				t.Fatalf("pkg/admit admits %s→%s speaker %q with %v", c.source, c.target, c.speaker, c.glossary)
			}
			id := uuid.New()
			keys := wire.DefaultKeys(id)
			upload(s, keys.SourceVideo, video)
			asrBefore := s.Depth("task.asr")
			env, err := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{SourceVideoKey: keys.SourceVideo,
				OutputAudioKey: keys.SourceAudio, SourceLanguage: c.source, TargetLanguage: c.target, SpeakerID: c.speaker,
				Glossary: c.glossary})
			if err != nil {
				t.Fatal(err)
			}
			s.Publish(env)
			if got := s.WaitStep(id, wire.StepExtractAudio, "succeeded", "failed"); got != "failed" {
				t.Fatalf("extract_audio %s, want failed", got)
			}
			_, dl := s.Refused(t, id, want.Error())
			if dl.Attempt != 1 {
				t.Errorf("dead-lettered at attempt %d, want the first", dl.Attempt)
			}
			if _, err := s.Blob.Stat(ctx, keys.SourceAudio); err == nil {
				t.Error("audio extracted for a refused task")
			}
			if n := s.Depth("task.asr") - asrBefore; n != 0 {
				t.Errorf("%d asr messages for a refused task", n)
			}
		})
	}
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	upload(s, keys.SourceVideo, video)
	env, err := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{SourceVideoKey: keys.SourceVideo,
		OutputAudioKey: keys.SourceAudio, SourceLanguage: "en", TargetLanguage: "es"})
	if err != nil {
		t.Fatal(err)
	}
	s.Expect(t, env, wire.StepExtractAudio, "succeeded", "")
}

// unknownProjectRefused: an outside publisher's message naming a project
// that is not one of the projects' records is dead-lettered on its first
// attempt with that reason, before any audio is extracted; one naming an
// existing project makes a task of that project, and one naming none a
// task of the default project.
func unknownProjectRefused(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	video := sample(t, "Hello there.", media.SampleSpeech)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO projects (id) VALUES ('studio')`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ project, want string }{{"nowhere", ""}, {"studio", "studio"}, {"", "default"}} {
		id := uuid.New()
		keys := wire.DefaultKeys(id)
		upload(s, keys.SourceVideo, video)
		env, err := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{SourceVideoKey: keys.SourceVideo,
			OutputAudioKey: keys.SourceAudio, Project: c.project})
		if err != nil {
			t.Fatal(err)
		}
		if c.want == "" {
			s.Publish(env)
			if got := s.WaitStep(id, wire.StepExtractAudio, "succeeded", "failed"); got != "failed" {
				t.Fatalf("extract_audio %s, want failed", got)
			}
			_, dl := s.Refused(t, id, `project "nowhere": no such project`)
			if dl.Attempt != 1 {
				t.Errorf("dead-lettered at attempt %d, want the first", dl.Attempt)
			}
			if _, err := s.Blob.Stat(ctx, keys.SourceAudio); err == nil {
				t.Error("audio extracted for a task of no project")
			}
			continue
		}
		s.Expect(t, env, wire.StepExtractAudio, "succeeded", "")
		var project string
		if err := s.DB.Pool.QueryRow(ctx, `SELECT project FROM tasks WHERE id = $1`, id).Scan(&project); err != nil || project != c.want {
			t.Errorf("project %q: the task's is %q (%v), want %q", c.project, project, err, c.want)
		}
	}
}

func seedMessageCreatesTask(t *testing.T, s *testenv.Stack) {
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	video := sample(t, "The quick brown fox jumps over the lazy dog.", media.SampleSpeech)
	upload(s, keys.SourceVideo, video)
	env := seedMessage(t, id)
	s.Publish(env)

	if got := s.WaitStep(id, wire.StepExtractAudio, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("extract_audio %s: task %+v", got, s.Task(id))
	}
	task := s.Task(id)
	if task.SourceLanguage != "en" || task.TargetLanguage != "de" || task.TraceID != env.TraceID ||
		task.SourceVideoKey != keys.SourceVideo || task.OutputVideoKey != keys.OutputVideo || task.Status != "running" {
		t.Errorf("task row = %+v", task)
	}

	checkRecordedProbe(t, s, id, video)

	wav, err := s.Blob.Get(context.Background(), keys.SourceAudio, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	r, err := media.NewWAVReader(bytes.NewReader(wav))
	if err != nil {
		t.Fatalf("stored audio: %v", err)
	}
	if r.Format.SampleRate != 16000 || r.Format.Channels != 1 || r.Format.BitsPerSample != 16 {
		t.Errorf("stored audio format = %+v, want 16 kHz mono 16-bit", r.Format)
	}
	if d := r.Duration().Seconds(); d < 2 || d > 10 {
		t.Errorf("stored audio lasts %.2fs", d)
	}

	var p wire.ASR
	next := s.NextMessage(t, "task.asr", &p)
	if next.TaskID != id || next.TraceID != env.TraceID || next.Attempt != 1 ||
		p != (wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR}) {
		t.Errorf("asr message = %+v payload %+v", next, p)
	}
}

func languagesFallBack(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	video := sample(t, "Hello there.", media.SampleSpeech)

	// The task row (as dubctl writes it) names the target; the payload the source.
	id := uuid.New()
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO tasks (id, target_language, speaker_id) VALUES ($1, 'es', 'en-us+f3')`, id); err != nil {
		t.Fatal(err)
	}
	keys := wire.DefaultKeys(id)
	upload(s, keys.SourceVideo, video)
	env, err := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{
		SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio, SourceLanguage: "fr",
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(env)
	if got := s.WaitStep(id, wire.StepExtractAudio, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("extract_audio %s: %+v", got, s.Task(id))
	}
	if task := s.Task(id); task.SourceLanguage != "fr" || task.TargetLanguage != "es" || task.SpeakerID != "en-us+f3" {
		t.Errorf("payload, then task: task row = %+v", task)
	}

	// Nothing anywhere: the configured defaults.
	id2 := uuid.New()
	upload(s, wire.DefaultKeys(id2).SourceVideo, video)
	s.Publish(seedMessage(t, id2))
	if got := s.WaitStep(id2, wire.StepExtractAudio, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("extract_audio %s", got)
	}
	if task := s.Task(id2); task.SourceLanguage != "en" || task.TargetLanguage != "de" {
		t.Errorf("defaults: task row = %+v", task)
	}
}

func badInputsFail(t *testing.T, s *testenv.Stack) {
	text := filepath.Join(t.TempDir(), "notes.mp4")
	if err := os.WriteFile(text, []byte("this is a text file, not a video\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, reason string
	}{
		{"text file renamed .mp4", text, "not a media file"},
		{"no audio track", sample(t, "Hi.", media.SampleNoAudio), "no audio stream"},
		{"truncated mp4", sample(t, "This video is cut short before its index.", media.SampleTruncatedIndex), "truncated"},
		{"too long", sample(t, "This sentence is long enough that, spoken at an ordinary pace with its pauses, it lasts well over six seconds in all.", media.SampleSpeech), "limit 6s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := uuid.New()
			asrBefore := s.Depth("task.asr")
			upload(s, wire.DefaultKeys(id).SourceVideo, c.file)
			env := seedMessage(t, id)
			s.Publish(env)
			if got := s.WaitStep(id, wire.StepExtractAudio, "succeeded", "failed"); got != "failed" {
				t.Fatalf("extract_audio %s, want failed", got)
			}
			if _, dl := s.Refused(t, id, c.reason); !strings.Contains(dl.FailureReason, wire.DefaultKeys(id).SourceVideo) {
				t.Errorf("dead letter reason %q, want it to name the key", dl.FailureReason)
			}
			if n := s.Depth("task.asr") - asrBefore; n != 0 {
				t.Errorf("%d asr messages for a bad input", n)
			}
		})
	}

	t.Run("key with ..", func(t *testing.T) {
		id := uuid.New()
		body := []byte(`{"task_id":"` + id.String() + `","step":"extract_audio","attempt":1,"trace_id":"trace-1",` +
			`"created_at":"2024-01-01T12:00:00Z","payload":{"source_video_key":"videos/` + id.String() +
			`/../../etc/passwd","output_audio_key":"audios/` + id.String() + `/source.wav"}}`)
		s.PublishRaw("task.extract_audio", body)
		dl, err := wire.DecodeDeadLetter(s.Next("task.dlq", 10e9))
		if err != nil {
			t.Fatal(err)
		}
		if dl.ErrorClass != wire.ClassInvalid || !strings.Contains(dl.FailureReason, "source_video_key") ||
			!strings.Contains(dl.FailureReason, "..") {
			t.Errorf("dead letter = %+v", dl)
		}
		var n int
		if err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM task_steps WHERE task_id = $1`, id).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d task_steps rows (err %v): an invalid message must not run", n, err)
		}
	})
}

// checkRecordedProbe: the task's row holds the probe of the video it was
// given (tasks.source_probe), which mux_video reuses for the same bytes:
// what ffprobe says of video.
func checkRecordedProbe(t *testing.T, s *testenv.Stack, id uuid.UUID, video string) {
	t.Helper()
	var raw []byte
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT source_probe FROM tasks WHERE id = $1`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	rec, err := media.ParseProbeRecord(raw)
	if err != nil || rec == nil {
		t.Fatalf("recorded probe %s: %v", raw, err)
	}
	got, err := rec.Reuse(video)
	if err != nil || got == nil {
		t.Fatalf("the recorded probe is not of the uploaded video (%v): %s", err, raw)
	}
	want, err := media.Probe(context.Background(), video)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recorded probe %+v, ffprobe says %+v", got, want)
	}
}

// doorProbeReused: a probe the door recorded with the task is what the
// step checks the video by when it is of the downloaded bytes (no ffprobe
// runs: a record claiming an hour is refused under MAX_VIDEO_SECONDS=6),
// and is ignored for other bytes (the step probes the 2 s video itself,
// passes, and records its own probe).
func doorProbeReused(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	video := sample(t, "Hello there.", media.SampleSpeech)
	info, err := media.Probe(ctx, video)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		stale bool
		want  string
	}{{"same bytes", false, "failed"}, {"other bytes", true, "succeeded"}} {
		t.Run(c.name, func(t *testing.T) {
			rec, err := media.RecordProbe(video, info)
			if err != nil || rec == nil {
				t.Fatalf("record: %v %v", rec, err)
			}
			rec.Info.Duration = time.Hour // what no ffprobe of this video says
			if c.stale {
				rec.SHA256 = strings.Repeat("0", 64)
			}
			raw, _ := json.Marshal(rec)
			id := uuid.New()
			if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO tasks (id, source_probe) VALUES ($1, $2)`, id, string(raw)); err != nil {
				t.Fatal(err)
			}
			upload(s, wire.DefaultKeys(id).SourceVideo, video)
			s.Publish(seedMessage(t, id))
			if got := s.WaitStep(id, wire.StepExtractAudio, "succeeded", "failed"); got != c.want {
				t.Fatalf("extract_audio %s, want %s", got, c.want)
			}
			if c.stale {
				checkRecordedProbe(t, s, id, video)
			} else {
				s.Refused(t, id, "limit 6s")
			}
		})
	}
}
