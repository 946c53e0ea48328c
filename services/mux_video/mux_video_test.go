package main

import (
	"bytes"
	"context"
	"github.com/dubflow/dubflow/pkg/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// videoHash hashes the packets of a file's video stream.
func videoHash(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-v", "error", "-i", file, "-map", "0:v:0", "-c", "copy", "-f", "md5", "-").Output()
	if err != nil {
		t.Fatalf("hash video of %s: %v", file, err)
	}
	return strings.TrimSpace(string(out))
}

// TestMuxVideo dubs a real sample video from espeak-ng clips.
func TestMuxVideo(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the worker's temporary files go here, and must go away
	s := testenv.NewStack(t, run, nil)
	s.Start()
	ctx := context.Background()

	id := uuid.New()
	keys := wire.DefaultKeys(id)
	video := filepath.Join(dir, "source.mp4")
	if err := media.MakeSampleVideo(ctx, "Hello my friend. Thank you very much for everything.", video, media.SampleOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Blob.PutFile(ctx, keys.SourceVideo, video, "video/mp4"); err != nil {
		t.Fatal(err)
	}
	src, err := media.Probe(ctx, video)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key, output_video_key)
		VALUES ($1, 'running', 'en', 'es', $2, $3)`, id, keys.SourceVideo, keys.OutputVideo); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'tts', 1, 'succeeded', now())`, id); err != nil {
		t.Fatal(err)
	}
	segs := []struct {
		start, end int
		src, mt    string
	}{
		{500, 1400, "Hello my friend.", "Hola, amigo mío."},
		{1400, 1500, "", ""},
		{1600, 3200, "Thank you very much for everything.", "Muchas gracias por todo."},
	}
	for i, sg := range segs {
		key := ""
		if sg.mt != "" {
			key = wire.SegmentKey(id, i)
			a, err := speech.NewEspeak().Synthesize(ctx, speech.SynthesisRequest{Text: sg.mt, Language: "es"})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Blob.Put(ctx, key, bytes.NewReader(a.WAV), int64(len(a.WAV)), "audio/wav"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, i, sg.start, sg.end, sg.src, sg.mt, key); err != nil {
			t.Fatal(err)
		}
	}

	env, err := wire.New(wire.StepMuxVideo, id, "trace-mux", wire.MuxVideo{TaskID: id, SourceVideoKey: keys.SourceVideo,
		TTSAudioKey: keys.DubAudio, OutputVideoKey: keys.OutputVideo})
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(env)
	if got := s.WaitStep(id, wire.StepMuxVideo, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("mux_video %s: %+v", got, s.Task(id))
	}

	// The output: video copied bit for bit, dub first and default, the
	// original second, both tagged, two subtitle tracks, same length.
	out := filepath.Join(dir, "final.mp4")
	if err := s.Blob.GetFile(ctx, keys.OutputVideo, out, 1<<30); err != nil {
		t.Fatal(err)
	}
	if a, b := videoHash(t, video), videoHash(t, out); a != b {
		t.Errorf("video stream changed: %s → %s", a, b)
	}
	info, err := media.Probe(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	audio, subs := info.StreamsOf(media.AudioStream), info.StreamsOf(media.SubtitleStream)
	spa, _ := media.ISO639("es")
	eng, _ := media.ISO639("en")
	if len(audio) != 2 || audio[0].Language != spa || !audio[0].Default || audio[1].Language != eng {
		t.Errorf("audio streams = %+v, want dub (%s, default) then original (%s)", audio, spa, eng)
	}
	if len(subs) != 2 {
		t.Errorf("subtitle streams = %+v, want 2", subs)
	}
	if d := info.Duration - src.Duration; d > 500e6 || d < -500e6 {
		t.Errorf("output lasts %s, source %s", info.Duration, src.Duration)
	}

	// The side products and the task's result.
	outDir := "outputs/" + id.String() + "/"
	for _, c := range []struct{ key, want string }{
		{outDir + "final.en.srt", "Thank you very much"},
		{outDir + "final.es.srt", "Muchas gracias"},
		{outDir + "timing.json", `"segments"`},
	} {
		b, err := s.Blob.Get(ctx, c.key, 1<<20)
		if err != nil || !strings.Contains(string(b), c.want) {
			t.Errorf("%s = %q (err %v), want it to contain %q", c.key, b, err, c.want)
		}
	}
	dub, err := s.Blob.Get(ctx, keys.DubAudio, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := media.NewWAVReader(bytes.NewReader(dub)); err != nil || r.Duration()-src.Duration > 100e6 || src.Duration-r.Duration() > 100e6 {
		t.Errorf("dub track: %v, err %v; want as long as the video (%s)", r, err, src.Duration)
	}
	task := s.Task(id)
	if task.Status != "done" || task.Result["output_video_key"] != keys.OutputVideo || task.Result["timing_report_key"] != outDir+"timing.json" ||
		task.Result["segments"] != float64(3) {
		t.Errorf("task = %+v", task)
	}
	ev, err := wire.DecodeEvent(s.Next(s.Events, 10e9))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Event != wire.EventTaskSucceeded || ev.TaskID != id || ev.Status != "done" || ev.OutputVideoKey != keys.OutputVideo ||
		!strings.Contains(string(ev.Data), "final.es.srt") {
		t.Errorf("event = %+v data %s", ev, ev.Data)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("temporary files left behind: %v (err %v)", left, err)
	}
}
