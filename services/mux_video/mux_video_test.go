package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/dubflow/dubflow/pkg/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// muxCase is a task ready for mux_video: a real sample video and
// espeak-ng clips in storage, its rows in Postgres.
type muxCase struct {
	s     *testenv.Stack
	id    uuid.UUID
	keys  wire.Keys
	video string
	src   *media.Info
}

// newMuxCase starts mux_video and stores a task whose tts step succeeded.
func newMuxCase(t *testing.T) *muxCase {
	t.Helper()
	dir := t.TempDir()
	c := &muxCase{s: testenv.NewStack(t, run, nil), id: uuid.New()}
	c.s.Start()
	ctx := context.Background()
	c.keys = wire.DefaultKeys(c.id)
	c.video = filepath.Join(dir, "source.mp4")
	if err := media.MakeSampleVideo(ctx, "Hello my friend. Thank you very much for everything.", c.video, media.SampleOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.s.Blob.PutFile(ctx, c.keys.SourceVideo, c.video, "video/mp4"); err != nil {
		t.Fatal(err)
	}
	var err error
	if c.src, err = media.Probe(ctx, c.video); err != nil {
		t.Fatal(err)
	}
	db := c.s.DB.Pool
	if _, err := db.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key, output_video_key)
		VALUES ($1, 'running', 'en', 'es', $2, $3)`, c.id, c.keys.SourceVideo, c.keys.OutputVideo); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'tts', 1, 'succeeded', now())`, c.id); err != nil {
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
		key, params := "", []byte(`{"skipped":"empty text"}`)
		if sg.mt != "" {
			key = wire.SegmentKey(c.id, i)
			a, err := speech.NewEspeak().Synthesize(ctx, speech.SynthesisRequest{Text: sg.mt, Language: "es"})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.s.Blob.Put(ctx, key, bytes.NewReader(a.WAV), int64(len(a.WAV)), "audio/wav"); err != nil {
				t.Fatal(err)
			}
			params, _ = json.Marshal(a.Params)
		}
		if _, err := db.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key, tts_params_json)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, c.id, i, sg.start, sg.end, sg.src, sg.mt, key, params); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// mux publishes the mux_video message with opts and waits for the step.
func (c *muxCase) mux(t *testing.T, opts *wire.MuxOptions) string {
	t.Helper()
	env, err := wire.New(wire.StepMuxVideo, c.id, "trace-mux", wire.MuxVideo{TaskID: c.id, SourceVideoKey: c.keys.SourceVideo,
		TTSAudioKey: c.keys.DubAudio, OutputVideoKey: c.keys.OutputVideo, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	c.s.Publish(env)
	if got := c.s.WaitStep(c.id, wire.StepMuxVideo, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("mux_video %s: %+v", got, c.s.Task(c.id))
	}
	out := filepath.Join(t.TempDir(), "final.mp4")
	if err := c.s.Blob.GetFile(context.Background(), c.keys.OutputVideo, out, 1<<30); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMuxVideo dubs a real sample video from espeak-ng clips.
func TestMuxVideo(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the worker's temporary files go here, and must go away
	c := newMuxCase(t)
	video, src := c.video, c.src
	ctx := context.Background()
	out := c.mux(t, nil)

	// The output: video copied bit for bit, dub first and default, the
	// original second, both tagged, two subtitle tracks, same length.
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

	c.checkSideProducts(t)
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("temporary files left behind: %v (err %v)", left, err)
	}
}

// checkSideProducts checks the subtitles, timing report, dub track, task
// result and event of a default run.
func (c *muxCase) checkSideProducts(t *testing.T) {
	t.Helper()
	s, id, keys, src := c.s, c.id, c.keys, c.src
	ctx := context.Background()
	outDir := "outputs/" + id.String() + "/"
	for _, c := range []struct{ key, want string }{
		{outDir + "final.en.srt", "Thank you very much"},
		{outDir + "final.es.srt", "Muchas gracias"},
		{outDir + "final.es.vtt", "WEBVTT"},
		{outDir + "final.en.vtt", "00:00:01.600 --> 00:00:03.200\nThank you very much"},
		{outDir + "final.es-en.srt", "Muchas gracias por todo.\n<i>Thank you very much for everything.</i>"},
		{outDir + "final.es-en.vtt", "Hola, amigo mío.\n<i>Hello my friend.</i>"},
		{outDir + "timing.json", `"start_drift_ms": 0`},
		{outDir + "timing.json", `"background": "duck"`},
		// Segments are numbered from 1 among all of the task's: the silent
		// second one keeps its number, the third is n 3 (idx 2).
		{outDir + "timing.json", "\"n\": 1,\n      \"idx\": 0,"},
		{outDir + "timing.json", "\"n\": 3,\n      \"idx\": 2,"},
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
}

// TestMuxVideoOptions passes a task's options in the message: the target
// subtitles are burnt into the picture (so it is re-encoded), the dub
// track is the voice alone, normalized to -23 LUFS.
func TestMuxVideoOptions(t *testing.T) {
	t.Parallel()
	c := newMuxCase(t)
	burn, lufs := true, -23.0
	out := c.mux(t, &wire.MuxOptions{BackgroundMode: media.BackgroundNone, LoudnessLUFS: &lufs, BurnSubtitles: &burn})
	if a, b := videoHash(t, c.video), videoHash(t, out); a == b {
		t.Error("video stream copied, want it re-encoded with the subtitles burnt in")
	}
	task := c.s.Task(c.id)
	mix, _ := task.Result["mix"].(map[string]any)
	if task.Status != "done" || task.Result["burned_subtitles"] != true || mix["background"] != media.BackgroundNone || mix["target_lufs"] != -23.0 {
		t.Errorf("task = %+v", task)
	}
}

// frameGray decodes the frame of video at second at as 8-bit grey pixels.
func frameGray(t *testing.T, video string, at float64) []byte {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-ss", strconv.FormatFloat(at, 'f', 2, 64), "-i", video,
		"-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "gray", "-").Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("frame at %.2fs of %s: %v", at, video, err)
	}
	return out
}

// meanDiff is the mean absolute difference of two frames' pixels.
func meanDiff(a, b []byte) float64 {
	var sum int
	for i := range min(len(a), len(b)) {
		d := int(a[i]) - int(b[i])
		sum += max(d, -d)
	}
	return float64(sum) / float64(min(len(a), len(b)))
}

// TestMuxVideoBurnsAnExtraOutput: a task whose plan asks for bilingual
// subtitles burned in gets final.burned.mp4 beside final.mp4: final.mp4
// as ever (its video copied bit for bit), the extra one re-encoded with the
// lines drawn into the picture (a frame while a line is shown differs from
// the original far more than one before any line), listed in the result.
func TestMuxVideoBurnsAnExtraOutput(t *testing.T) {
	t.Parallel()
	c := newMuxCase(t)
	ctx := context.Background()
	if _, err := c.s.DB.Pool.Exec(ctx, `INSERT INTO task_plans (task_id, burn_subtitles) VALUES ($1, 'bilingual')`, c.id); err != nil {
		t.Fatal(err)
	}
	out := c.mux(t, nil)
	if a, b := videoHash(t, c.video), videoHash(t, out); a != b {
		t.Errorf("final.mp4's video changed: %s → %s", a, b)
	}
	burnedKey := "outputs/" + c.id.String() + "/final.burned.mp4"
	if got := c.s.Task(c.id).Result["burned_video_key"]; got != burnedKey {
		t.Fatalf("result's burned_video_key %v, want %s", got, burnedKey)
	}
	burned := filepath.Join(t.TempDir(), "final.burned.mp4")
	if err := c.s.Blob.GetFile(ctx, burnedKey, burned, 1<<30); err != nil {
		t.Fatal(err)
	}
	info, err := media.Probe(ctx, burned)
	if err != nil || len(info.StreamsOf(media.AudioStream)) != 2 || len(info.StreamsOf(media.SubtitleStream)) != 0 {
		t.Fatalf("burned output %+v, %v: want the two audio tracks, no subtitle track", info, err)
	}
	before := meanDiff(frameGray(t, c.video, 0.2), frameGray(t, burned, 0.2))
	during := meanDiff(frameGray(t, c.video, 2.5), frameGray(t, burned, 2.5))
	t.Logf("frame difference before any line %.2f, while one is shown %.2f", before, during)
	if during < 3*before+1 {
		t.Errorf("frame difference %.2f while a line is shown, %.2f before: want the lines drawn in", during, before)
	}
}
