package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/tasks"
	"github.com/minio/minio-go/v7"
)

// TestSubmitSeveralLanguages: --target es,ca submits one parent task that
// names both languages, and uploads the video once, under the parent's key.
func TestSubmitSeveralLanguages(t *testing.T) {
	e := setup(t)
	video := sample(t, media.SampleSpeech)
	stdout, stderr, code := run(t, "submit", "--input", video, "--target", "es,ca", "--json")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	var v taskView
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("submit --json: %v: %s", err, stdout)
	}
	if v.TargetLanguage != "es" || v.Languages == nil || strings.Join(v.Languages.TargetLanguages, ",") != "es,ca" ||
		len(v.Languages.Children) != 0 {
		t.Fatalf("task %+v languages %+v", v, v.Languages)
	}
	ctx := context.Background()
	fi, _ := os.Stat(video)
	// The video is uploaded once, under the parent's key: the system
	// places each child's where the transcription ends.
	key := wire.DefaultKeys(v.TaskID).SourceVideo
	if info, err := e.bucket.Client.StatObject(ctx, e.bucket.Name, key, minio.StatObjectOptions{}); err != nil ||
		info.Size != fi.Size() {
		t.Errorf("video at %s: %d bytes (%v), want %d", key, info.Size, err, fi.Size())
	}
	for _, l := range []string{"es", "ca"} {
		key := wire.DefaultKeys(wire.ChildTaskID(v.TaskID, l)).SourceVideo
		if _, err := e.bucket.Client.StatObject(ctx, e.bucket.Name, key, minio.StatObjectOptions{}); err == nil {
			t.Errorf("dubctl uploaded the video of the %s child at %s as well; once is enough", l, key)
		}
	}
	var targets []string
	if err := e.db.Pool.QueryRow(ctx, `SELECT targets FROM tasks WHERE id = $1`, v.TaskID).Scan(&targets); err != nil ||
		strings.Join(targets, ",") != "es,ca" {
		t.Errorf("tasks.targets %v (%v)", targets, err)
	}
	var out bytes.Buffer
	v.Languages = &view.Languages{TargetLanguages: []string{"es", "ca"}, Children: []view.Child{
		{TaskID: wire.ChildTaskID(v.TaskID, "es"), TargetLanguage: "es", Status: view.Done, OutputVideoKey: "outputs/x/final.mp4"},
		{TaskID: wire.ChildTaskID(v.TaskID, "ca"), TargetLanguage: "ca", Status: view.Failed, Error: "tts: gone"}}}
	tasks.PrintLanguages(&out, &v)
	for _, want := range []string{"targets   es, ca", "LANGUAGE", "outputs/x/final.mp4", "tts: gone"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}
