package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/blob/blobtest"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestLimitsAreEnforced runs the worker against storage whose stat claims
// every object is one byte, under a 6 s limit and a 1 MiB clip limit: a
// source video whose container claims 2 s but whose video stream runs 20 s,
// and a clip larger than the clip limit, each fail the task with the limit
// named and store no output; the worker keeps serving.
func TestLimitsAreEnforced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.NewStack(t, run, map[string]string{"MAX_VIDEO_SECONDS": "6", "MAX_CLIP_BYTES": "1048576"})
	s.Env["S3_ENDPOINT"] = blobtest.LyingProxy(t, s.Env["S3_ENDPOINT"], blobtest.SmallStat)
	s.Start()
	clip, err := speech.NewEspeak().Synthesize(ctx, speech.SynthesisRequest{Text: "Hola.", Language: "es"})
	if err != nil {
		t.Fatal(err)
	}
	bigClip := append(bytes.Clone(clip.WAV), bytes.Repeat([]byte{0}, 2<<20)...)

	for _, c := range []struct {
		name, reason string
		kind         media.SampleKind
		clip         []byte
		want         string
	}{
		{"video stream longer than the container claims", "MAX_VIDEO_SECONDS=6", media.SampleLongerThanClaimed, clip.WAV, "failed"},
		{"clip larger than the download limit", "MAX_CLIP_BYTES=1048576", media.SampleSpeech, bigClip, "failed"},
		{"the worker keeps serving", "", media.SampleSpeech, clip.WAV, "succeeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := uuid.New()
			keys := wire.DefaultKeys(id)
			stage(t, s, id, c.kind, c.clip)
			env, err := wire.New(wire.StepMuxVideo, id, "trace-mux", wire.MuxVideo{TaskID: id, SourceVideoKey: keys.SourceVideo,
				TTSAudioKey: keys.DubAudio, OutputVideoKey: keys.OutputVideo})
			if err != nil {
				t.Fatal(err)
			}
			s.Expect(t, env, wire.StepMuxVideo, c.want, c.reason)
			if _, err := s.Blob.Stat(ctx, keys.OutputVideo); c.want == "failed" && err == nil {
				t.Error("an output was stored")
			}
		})
	}
}

// stage uploads a sample video of kind and one clip, and writes the rows
// mux_video reads: the task, tts succeeded, one segment.
func stage(t *testing.T, s *testenv.Stack, id uuid.UUID, kind media.SampleKind, clip []byte) {
	t.Helper()
	ctx := context.Background()
	keys := wire.DefaultKeys(id)
	video := t.TempDir() + "/source.media"
	if err := media.MakeSampleVideo(ctx, "Hello.", video, media.SampleOptions{Kind: kind}); err != nil {
		t.Fatal(err)
	}
	if err := s.Blob.PutFile(ctx, keys.SourceVideo, video, "video/mp4"); err != nil {
		t.Fatal(err)
	}
	key := wire.SegmentKey(id, 0)
	if err := s.Blob.Put(ctx, key, bytes.NewReader(clip), int64(len(clip)), "audio/wav"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO tasks (id, status, source_language, target_language, source_video_key, output_video_key)
			VALUES ($1, 'running', 'en', 'es', $2, $3)`, []any{id, keys.SourceVideo, keys.OutputVideo}},
		{`INSERT INTO task_steps (task_id, step, attempt, status, finished_at) VALUES ($1, 'tts', 1, 'succeeded', now())`, []any{id}},
		{`INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key)
			VALUES ($1, 0, 300, 1500, 'Hello.', 'Hola.', $2)`, []any{id, key}},
	} {
		if _, err := s.DB.Pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
}
