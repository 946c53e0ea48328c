package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob/blobtest"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
)

// TestLimitsAreEnforced runs the worker against storage whose stat claims
// every object is one byte, with a 6 s and 8 MiB limit, in a temporary
// folder where a crashed run left its scratch folder: the leftover goes at
// start (and nothing else), a video whose container claims 2 s but whose
// streams run 20 s and an object larger than the download limit each fail
// the task with the limit named, and the worker keeps serving.
func TestLimitsAreEnforced(t *testing.T) {
	lying := sample(t, "Hello there.", media.SampleLongerThanClaimed)
	good := sample(t, "Hello there.", media.SampleSpeech)
	// A playable video padded past the limit: only the size is wrong.
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.mp4")
	if err := os.WriteFile(big, append(data, bytes.Repeat([]byte{0}, 9<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}

	tmp := t.TempDir()
	old := time.Now().Add(-48 * time.Hour)
	prefix := worker.TempPrefix(service)
	for name, mtime := range map[string]time.Time{
		prefix + "crashed": old, prefix + "running": time.Now(),
		"dubflow-mux_video-crashed": old, "someone-elses": old,
	} {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)

	s := testenv.NewStack(t, run, map[string]string{"MAX_VIDEO_SECONDS": "6", "MAX_VIDEO_BYTES": "8388608"})
	s.Env["S3_ENDPOINT"] = blobtest.LyingProxy(t, s.Env["S3_ENDPOINT"], blobtest.SmallStat)
	s.Start()

	t.Run("stale scratch folders of this service are removed at start", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(tmp, prefix+"crashed")); !os.IsNotExist(err) {
			t.Errorf("the crashed run's folder is still there (stat: %v)", err)
		}
		for _, keep := range []string{prefix + "running", "dubflow-mux_video-crashed", "someone-elses"} {
			if _, err := os.Stat(filepath.Join(tmp, keep, "data")); err != nil {
				t.Errorf("%s was touched: %v", keep, err)
			}
		}
	})
	for _, c := range []struct{ name, file, reason string }{
		{"streams longer than the container claims", lying, "MAX_VIDEO_SECONDS=6"},
		{"object larger than the download limit", big, "MAX_VIDEO_BYTES=8388608"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := uuid.New()
			key := wire.DefaultKeys(id).SourceVideo
			upload(s, key, c.file)
			asrBefore := s.Depth("task.asr")
			if task := s.Expect(t, seedMessage(t, id), wire.StepExtractAudio, "failed", c.reason); !strings.Contains(task.Error, key) {
				t.Errorf("task error %q, want it to name %s", task.Error, key)
			}
			if n := s.Depth("task.asr") - asrBefore; n != 0 {
				t.Errorf("%d asr messages", n)
			}
			if _, err := s.Blob.Stat(context.Background(), wire.DefaultKeys(id).SourceAudio); err == nil {
				t.Error("audio was stored")
			}
			left, _ := filepath.Glob(filepath.Join(tmp, prefix+"*"))
			if len(left) != 1 { // the "running" folder made above
				t.Errorf("scratch left behind: %v", left)
			}
		})
	}
	t.Run("the worker keeps serving", func(t *testing.T) {
		id := uuid.New()
		upload(s, wire.DefaultKeys(id).SourceVideo, good)
		s.Expect(t, seedMessage(t, id), wire.StepExtractAudio, "succeeded", "")
	})
}
