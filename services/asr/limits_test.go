package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dubflow/dubflow/pkg/blob/blobtest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestLimitsAreEnforced runs asr against storage whose stat claims every
// object is one byte, with a 5 s and 1 MiB limit: 11 s of speech, and a WAV
// whose header announces 11 s but which carries 2 MiB more, each fail the
// task naming the limit; a 3 s clip is still transcribed.
func TestLimitsAreEnforced(t *testing.T) {
	t.Parallel()
	jfk := filepath.Join(fixtures(t), "jfk.wav")
	data, err := os.ReadFile(jfk)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	padded := filepath.Join(dir, "padded.wav")
	if err := os.WriteFile(padded, append(data, bytes.Repeat([]byte{0}, 2<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.wav")
	if out, err := exec.Command("ffmpeg", "-v", "error", "-i", jfk, "-t", "3", "-c", "copy", short).CombinedOutput(); err != nil {
		t.Fatalf("cut %s: %v: %s", jfk, err, out)
	}

	s := testenv.NewStack(t, run, map[string]string{"TRANSLATE_BATCH_SIZE": "3", "MAX_VIDEO_SECONDS": "5", "MAX_AUDIO_BYTES": "1048576"})
	s.Env["S3_ENDPOINT"] = blobtest.LyingProxy(t, s.Env["S3_ENDPOINT"], blobtest.SmallStat)
	s.Start()
	for _, c := range []struct{ name, file, reason, want string }{
		{"audio longer than the limit", jfk, "MAX_VIDEO_SECONDS=5", "failed"},
		{"object larger than the download limit", padded, "MAX_AUDIO_BYTES=1048576", "failed"},
		{"the worker keeps serving", short, "", "succeeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.Expect(t, newTask(s, c.file), wire.StepASR, c.want, c.reason)
		})
	}
}
