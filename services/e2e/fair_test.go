package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/cores"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// TestShortTaskNotQueuedBehindLongParts: a long recording cut into chunks,
// each segment its own translate batch and tts part (TRANSLATE_BATCH_SIZE
// 1), has many tts parts; while no tts worker runs, they and then a short
// clip's tts part are emitted. With one tts consumer started after both,
// the clip's tts part starts once at most the window (cores.Usable) of the
// long task's parts are done, not after all of them: the long task keeps
// only its window of parts in the tts queue, the others wait held until
// its parts succeed. Both tasks are dubbed in the end, every held part
// released.
func TestShortTaskNotQueuedBehindLongParts(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"ASR_CHUNK_SECONDS": "5", "TRANSLATE_BATCH_SIZE": "1", "WORKER_CONCURRENCY": "1"})
	s.start(t, "extract_audio", "asr", "translate", "mux_video", "dlq_recorder")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	long := s.submit(t, ctx, fixtureVideo(t, ctx, "two_cities.wav", 0))
	s.waitSucceeded(t, ctx, long, "asr", "translate")
	short := s.submit(t, ctx, fixtureVideo(t, ctx, "jfk.wav", 0))
	s.waitSucceeded(t, ctx, short, "asr", "translate")
	window := cores.Usable()
	var parts int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM step_parts WHERE task_id = $1 AND step = 'tts'`,
		long).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts < window+3 {
		t.Fatalf("the long task has %d tts parts; want at least %d for the test to tell", parts, window+3)
	}

	s.start(t, "tts")
	for _, id := range []uuid.UUID{long, short} {
		if v, code := s.waitTask(t, ctx, id, "", 15*time.Minute); code != 0 || v.Status != "done" {
			t.Fatalf("task %s: exit %d, %s: %s", id, code, v.Status, v.Error)
		}
	}
	var before, held int
	err := s.db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM task_steps l WHERE l.task_id = $1 AND l.step = 'tts' AND l.status = 'succeeded'
		    AND l.finished_at <= (SELECT min(started_at) FROM task_steps WHERE task_id = $2 AND step = 'tts')),
		(SELECT count(*) FROM held_parts WHERE task_id IN ($1, $2))`, long, short).Scan(&before, &held)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of the long task's %d tts parts done before the short task's tts started (window %d)", before, parts, window)
	if before > window {
		t.Errorf("the short task's tts started after %d of the long task's %d tts parts were done; want at most %d (the window)",
			before, parts, window)
	}
	if held != 0 {
		t.Errorf("%d parts still held after both tasks are done", held)
	}
}

// waitSucceeded waits until each of the task's steps has succeeded.
func (s *stack) waitSucceeded(tb testing.TB, ctx context.Context, id uuid.UUID, steps ...string) {
	tb.Helper()
	for _, step := range steps {
		testenv.EventuallyWithin(tb, 10*time.Minute, step+" of "+id.String()+" to succeed", func() bool {
			var done bool
			err := s.db.Pool.QueryRow(ctx, `SELECT step_succeeded($1, $2)`, id, step).Scan(&done)
			return err == nil && done
		})
	}
}
