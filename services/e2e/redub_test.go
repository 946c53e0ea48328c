package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// TestRedub dubs a video, then re-dubs one line with dubctl: exactly that
// segment changes, task_steps gains exactly one tts attempt and one
// mux_video attempt (part v2), and the first version's objects stay.
func TestRedub(t *testing.T) {
	t.Parallel() // each test runs its own stack (database, virtual host, bucket, processes)
	s := newStack(t, nil)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	video := filepath.Join(dir, "talk.mp4")
	if err := media.MakeSampleVideo(ctx, sampleText, video, media.SampleOptions{Lead: sampleLead}); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := s.dubctl(t, ctx, "submit", "--input", video, "--wait", "--json", "--timeout", "3m",
		"--output", filepath.Join(dir, "v1.mp4"))
	v1 := decodeTask(t, stdout, stderr)
	if code != 0 {
		t.Fatalf("submit: exit %d, %s: %s\n%s", code, v1.Status, v1.Error, stderr)
	}
	id := v1.TaskID
	before := s.segments(t, ctx, id)
	attempts := s.attempts(t, ctx, id)
	const text = "Hola a todos, esta línea fue corregida."
	out := filepath.Join(dir, "v2.mp4")
	stdout, stderr, code = s.dubctl(t, ctx, "redub", id.String(), "--segment", "1", "--text", text,
		"--wait", "--json", "--timeout", "3m", "--output", out)
	v2 := decodeTask(t, stdout, stderr)
	if code != 0 || v2.Status != "done" || v2.OutputPath != out {
		t.Fatalf("redub --wait: exit %d, %+v\n%s", code, v2, stderr)
	}
	if want := wire.VersionKeys(id, 2).OutputVideo; v2.OutputVideoKey != want {
		t.Errorf("output key %s, want %s", v2.OutputVideoKey, want)
	}
	if d, want := duration(t, ctx, out), duration(t, ctx, video); d < want-time.Second || d > want+time.Second {
		t.Errorf("version 2 lasts %s, the source %s", d, want)
	}
	// Exactly one segment changed.
	after := s.segments(t, ctx, id)
	if len(after) != len(before) || *after[0].Text != text || !after[0].Synthesized || after[0].Fit == nil {
		t.Fatalf("segment 1 after the re-dub: %+v (before %+v)", after[0], before[0])
	}
	for i := 1; i < len(after); i++ {
		if !reflect.DeepEqual(after[i], before[i]) {
			t.Errorf("segment %d changed: %+v → %+v", i+1, before[i], after[i])
		}
	}
	// Exactly two new attempts: tts v2 and mux_video v2, each attempt 1.
	checkAdded(t, attempts, s.attempts(t, ctx, id),
		map[string]string{"tts/v2/1": "succeeded", "mux_video/v2/1": "succeeded"})
	// Both versions' objects exist; the first one's clip of segment 1 too.
	for _, key := range []string{wire.DefaultKeys(id).OutputVideo, v2.OutputVideoKey,
		wire.SegmentKey(id, before[0].Idx), wire.SegmentVersionKey(id, before[0].Idx, 2)} {
		if _, err := s.bucket.Client.StatObject(ctx, s.bucket.Name, key, minio.StatObjectOptions{}); err != nil {
			t.Errorf("object %s: %v", key, err)
		}
	}
	s.checkVersions(t, ctx, id)
	// A segment the task does not have is a usage error.
	_, stderr, code = s.dubctl(t, ctx, "redub", id.String(), "--segment", fmt.Sprint(len(after)+1), "--text", "x")
	if code != 2 {
		t.Errorf("redub of segment %d: exit %d, want 2: %s", len(after)+1, code, stderr)
	}
}

// segments runs `dubctl segments --json`.
func (s *stack) segments(t *testing.T, ctx context.Context, id uuid.UUID) []view.Segment {
	t.Helper()
	stdout, stderr, code := s.dubctl(t, ctx, "segments", id.String(), "--json")
	var segs []view.Segment
	if err := json.Unmarshal([]byte(stdout), &segs); code != 0 || err != nil || len(segs) == 0 {
		t.Fatalf("segments: exit %d (%v)\n%s\n%s", code, err, stdout, stderr)
	}
	return segs
}

// attempts returns the task's attempts as "step/part/attempt" → status.
func (s *stack) attempts(t *testing.T, ctx context.Context, id uuid.UUID) map[string]string {
	t.Helper()
	rows, err := s.db.Pool.Query(ctx, `SELECT step, part, attempt, status FROM task_steps WHERE task_id = $1`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var step, part, status string
		var attempt int
		if err := rows.Scan(&step, &part, &attempt, &status); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s/%s/%d", step, part, attempt)] = status
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkVersions: `dubctl versions` lists both outputs, ready.
func (s *stack) checkVersions(t *testing.T, ctx context.Context, id uuid.UUID) {
	t.Helper()
	stdout, stderr, code := s.dubctl(t, ctx, "versions", id.String(), "--json")
	var vs []view.Version
	if err := json.Unmarshal([]byte(stdout), &vs); code != 0 || err != nil {
		t.Fatalf("versions: exit %d (%v)\n%s", code, err, stderr)
	}
	if len(vs) != 2 || vs[0].Version != 1 || !vs[0].Ready || vs[1].Version != 2 || !vs[1].Ready {
		t.Errorf("versions: %+v", vs)
	}
}

// checkAdded: the attempts now are those before, unchanged, plus want.
func checkAdded(t *testing.T, before, now, want map[string]string) {
	t.Helper()
	added := map[string]string{}
	for k, st := range now {
		if old, ok := before[k]; !ok {
			added[k] = st
		} else if old != st {
			t.Errorf("attempt %s changed from %s to %s", k, old, st)
		}
	}
	if !reflect.DeepEqual(added, want) || len(now) != len(before)+len(want) {
		t.Errorf("new attempts %v, want %v", added, want)
	}
}
