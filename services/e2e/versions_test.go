package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// TestVersionsListOnlyObjectsThatExist runs the real workers over tasks in
// several states — dubbed, re-dubbing, re-dubbed, without speech (failed,
// and `dubctl wait` exits 1 saying so; and one done without a video, as
// earlier workers left it), refused media, cancelled — and
// checks, through `dubctl versions --json`, that every key a version lists
// is an object in the bucket (nothing is deleted by the test).
func TestVersionsListOnlyObjectsThatExist(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	good, silent, notes := filepath.Join(dir, "good.mp4"), filepath.Join(dir, "silent.mp4"), disguisedText(t, dir)
	if err := media.MakeSampleVideo(ctx, sampleText, good, media.SampleOptions{Lead: sampleLead}); err != nil {
		t.Fatal(err)
	}
	if err := media.MakeSampleVideo(ctx, sampleText, silent, media.SampleOptions{Kind: media.SampleSilent}); err != nil {
		t.Fatal(err)
	}
	dubbed, quiet := s.submit(t, ctx, good), s.submit(t, ctx, silent)
	refused := s.submitRaw(t, ctx, "submit", "--input", notes, "--no-validate")
	cancelled := s.submit(t, ctx, good)
	if _, err := task.Apply(ctx, s.db.Pool, task.Cancel(task.Ref{ID: cancelled}, "test")); err != nil {
		t.Fatal(err)
	}
	// A task done without speech, as workers before issue 47 left it: done,
	// no video written.
	legacy := uuid.New()
	for _, tr := range []task.Transition{
		task.Create(task.Details{ID: legacy, SourceLanguage: "en", TargetLanguage: "es",
			SourceVideoKey: wire.DefaultKeys(legacy).SourceVideo, OutputVideoKey: wire.DefaultKeys(legacy).OutputVideo}),
		task.Start(task.Ref{ID: legacy}), task.Succeed(task.Ref{ID: legacy}, json.RawMessage(`{"no_speech":true}`), ""),
	} {
		if _, err := task.Apply(ctx, s.db.Pool, tr); err != nil {
			t.Fatal(err)
		}
	}
	all := []uuid.UUID{dubbed, quiet, refused, cancelled, legacy}

	if v, code := s.waitTask(t, ctx, quiet, "", 2*time.Minute); v.Status != "failed" || code != 1 ||
		v.Error != "asr: no speech found in the audio" {
		t.Errorf("a video without speech: %s (exit %d) %q, want failed, exit 1: asr: no speech found in the audio", v.Status, code, v.Error)
	}
	if v, _ := s.waitTask(t, ctx, dubbed, "", 2*time.Minute); v.Status != "done" {
		t.Fatalf("dub: %s %q", v.Status, v.Error)
	}
	s.checkListedObjects(t, ctx, all...)
	// A re-dub: its version is listed at once, its keys only once written.
	if _, stderr, code := s.dubctl(t, ctx, "redub", dubbed.String(), "--segment", "1", "--text", "Buenos días a todos."); code != 0 {
		t.Fatalf("redub: exit %d: %s", code, stderr)
	}
	s.checkListedObjects(t, ctx, all...)
	if v, _ := s.waitTask(t, ctx, dubbed, "", 2*time.Minute); v.Status != "done" {
		t.Fatalf("redub: %s %q", v.Status, v.Error)
	}
	if n := s.checkListedObjects(t, ctx, all...); n < 2 {
		t.Errorf("%d keys listed, want at least the videos of both versions", n)
	}
}

// submitRaw runs dubctl with args and returns the task id it printed.
func (s *stack) submitRaw(tb testing.TB, ctx context.Context, args ...string) uuid.UUID {
	tb.Helper()
	stdout, stderr, code := s.dubctl(tb, ctx, args...)
	id, err := uuid.Parse(strings.TrimSpace(stdout))
	if code != 0 || err != nil {
		tb.Fatalf("dubctl %v: exit %d, %q: %s", args, code, stdout, stderr)
	}
	return id
}

// checkListedObjects lists each task's versions with dubctl and checks
// that every key listed is an object in the bucket; it returns how many
// keys were listed.
func (s *stack) checkListedObjects(t *testing.T, ctx context.Context, ids ...uuid.UUID) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		stdout, stderr, code := s.dubctl(t, ctx, "versions", id.String(), "--json")
		var vs []view.Version
		if err := json.Unmarshal([]byte(stdout), &vs); code != 0 || err != nil {
			t.Fatalf("versions of %s: exit %d (%v)\n%s", id, code, err, stderr)
		}
		for _, v := range vs {
			for _, key := range []string{v.OutputVideoKey, v.DubAudioKey} {
				if key == "" {
					continue
				}
				n++
				if _, err := s.bucket.Client.StatObject(ctx, s.bucket.Name, key, minio.StatObjectOptions{}); err != nil {
					t.Errorf("task %s version %d (ready %v) lists %s, which does not exist: %v", id, v.Version, v.Ready, key, err)
				}
			}
		}
	}
	return n
}
