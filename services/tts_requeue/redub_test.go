package main

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
)

// TestRequeueParkedRedub: a re-dub whose synthesis was parked (part v2 of
// tts) is re-driven as the next attempt of that part, not of the first
// dub's part "" (which succeeded, so the runtime would skip it as done).
func TestRequeueParkedRedub(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := f.task(t, "compensating", time.Second, 3, []int{1}, true, false)
	first, err := wire.New(wire.StepTTS, id, "trace-rq", wire.TTS{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	redub, err := wire.New(wire.StepTTS, id, "trace-rq", wire.TTS{TaskID: id, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := first.Marshal()
	b2, _ := redub.Marshal()
	for _, row := range []struct {
		part, status string
		body         []byte
	}{{"", "succeeded", b1}, {"v2", "parked", b2}} {
		if _, err := f.pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, message)
			VALUES ($1, 'tts', $2, 1, $3, $4)`, id, row.part, row.status, row.body); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'tts', ''), ($1, 'tts', 'v2')`,
		id); err != nil {
		t.Fatal(err)
	}
	if done := f.run(t); len(done) != 1 || done[0].TaskID != id {
		t.Fatalf("requeued %+v, want the re-dub", done)
	}
	msgs := f.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	part, err := msgs[0].Part()
	if err != nil || part != "v2" || msgs[0].Attempt != 2 {
		t.Errorf("re-drove part %q attempt %d (%v), want v2 attempt 2", part, msgs[0].Attempt, err)
	}
}
