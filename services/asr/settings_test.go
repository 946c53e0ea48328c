package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestBatchSizeChangesWhileRunning: asr seeds translate.batch_size from
// TRANSLATE_BATCH_SIZE (3); set to 2 while it runs, the next transcript
// fans out in batches of 2, without a restart.
func TestBatchSizeChangesWhileRunning(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, run, map[string]string{"TRANSLATE_BATCH_SIZE": "3"})
	s.Start()
	ctx := context.Background()
	if _, err := setting.Set(ctx, s.DB.Pool, setting.TranslateBatchSize, "2", "operator"); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("dubflow_setting{key=%q} 2\n", setting.TranslateBatchSize)
	testenv.EventuallyWithin(t, setting.Poll+time.Second, "asr to take the change", func() bool {
		resp, err := http.Get("http://" + s.Env["OPS_ADDR"] + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), want)
	})
	env := newTask(s, filepath.Join(fixtures(t), "jfk.wav"))
	s.Publish(env)
	if got := s.WaitStep(env.TaskID, wire.StepASR, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("asr %s", got)
	}
	var segments int
	if err := s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM segments WHERE task_id = $1`, env.TaskID).Scan(&segments); err != nil {
		t.Fatal(err)
	}
	for n := (segments + 1) / 2; n > 0; n-- {
		var p wire.Translate
		s.NextMessage(t, "task.translate", &p)
		if p.BatchSize != 2 || len(p.SegmentIDs) > 2 {
			t.Errorf("translate payload %+v, want batches of 2", p)
		}
	}
}
