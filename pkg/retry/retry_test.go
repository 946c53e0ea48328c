package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seed makes a task in status with speaker whose steps before failedAt
// succeeded and whose failedAt attempt ended with status last (from its
// message, as the runtime keeps it).
func seed(t *testing.T, pool *pgxpool.Pool, status, speaker, failedAt, last string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	if _, err := pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, speaker_id,
		source_video_key, output_video_key, trace_id) VALUES ($1, $2, 'en', 'es', $3, $4, $5, 'trace-retry')`,
		id, status, speaker, keys.SourceVideo, keys.OutputVideo); err != nil {
		t.Fatal(err)
	}
	for _, s := range wire.Pipeline {
		if s == failedAt {
			break
		}
		if _, err := pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
			VALUES ($1, $2, 1, 'succeeded', now())`, id, s); err != nil {
			t.Fatal(err)
		}
	}
	var payload any = wire.TTS{TaskID: id, SpeakerID: speaker}
	switch failedAt {
	case wire.StepTranslate:
		payload = wire.Translate{TaskID: id, SegmentIDs: []string{"seg-0"}, SourceLanguage: "en", TargetLanguage: "es"}
	case wire.StepMuxVideo:
		payload = wire.MuxFor(id, 0, keys.SourceVideo, keys.OutputVideo)
	}
	env, err := wire.New(failedAt, id, "trace-retry", payload)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := env.Marshal()
	if _, err := pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, message, finished_at)
		VALUES ($1, $2, $3, 1, $4, $5, now())`, id, failedAt, partOf(failedAt), last, body); err != nil {
		t.Fatal(err)
	}
	return id
}

func partOf(step string) string {
	if step == wire.StepTranslate {
		return "seg-0"
	}
	return ""
}

// speakerOf reads the task's speaker.
func speakerOf(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT speaker_id FROM tasks WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRetry runs the retries every door shares (console, dubctl).
func TestRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	admittest.AnnounceInstalled(t, pool)

	t.Run("a compensating task with another speaker", func(t *testing.T) {
		id := seed(t, pool, task.Compensating, "zz9+nonexistent", wire.StepTTS, "parked")
		if _, err := pool.Exec(ctx, `INSERT INTO step_replays (task_id, step, part, base_attempt, reason)
			VALUES ($1, 'tts', '', 2, 'tts_requeue: 1 segments without audio')`, id); err != nil {
			t.Fatal(err)
		}
		r, err := retry.Task(ctx, pool, id, retry.Options{Speaker: "es+m3", By: "test"})
		if err != nil || r.Status != task.Running || r.Speaker != "es+m3" || len(r.Replayed) != 1 ||
			r.Replayed[0].Step != wire.StepTTS || r.Replayed[0].Attempt != 3 || len(r.Outbox) == 0 {
			t.Fatalf("retry: %+v, %v", r, err)
		}
		if n, err := compensation.Requeues(ctx, pool, id); err != nil || n != 0 {
			t.Errorf("requeues after an operator's retry: %d (%v), want the count started again", n, err)
		}
	})
	t.Run("a failed task before tts with another speaker", func(t *testing.T) {
		id := seed(t, pool, task.Failed, "", wire.StepTranslate, "failed")
		r, err := retry.Task(ctx, pool, id, retry.Options{Speaker: "en-us+f3"})
		if err != nil || r.Status != task.Running || len(r.Replayed) != 1 || r.Replayed[0].Step != wire.StepTranslate ||
			r.Replayed[0].Part != "seg-0" || speakerOf(t, pool, id) != "en-us+f3" {
			t.Fatalf("retry: %+v, %v (speaker %q)", r, err, speakerOf(t, pool, id))
		}
	})
	t.Run("refusals", func(t *testing.T) { refusals(t, pool) })
}

// refusals: what cannot be retried is refused, saying why, and changes
// nothing.
func refusals(t *testing.T, pool *pgxpool.Pool) {
	ctx := context.Background()
	muxed := seed(t, pool, task.Failed, "es", wire.StepMuxVideo, "failed")
	running := seed(t, pool, task.Running, "", wire.StepTTS, "failed")
	compensating := seed(t, pool, task.Compensating, "es", wire.StepTTS, "parked")
	parent, child := seed(t, pool, task.Cancelled, "", wire.StepTranslate, "failed"), seed(t, pool, task.Cancelled, "", wire.StepTranslate, "failed")
	if _, err := pool.Exec(ctx, `UPDATE tasks SET parent_task_id = $2 WHERE id = $1`, child, parent); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE tasks SET error = 'cancelled: by an operator' WHERE id = $1`, parent); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		id   uuid.UUID
		opts retry.Options
		is   error
		text string
	}{
		{"a new speaker once the speech is synthesized", muxed, retry.Options{Speaker: "es+m3"}, retry.ErrRefused, "its speech was synthesized already"},
		{"a running task", running, retry.Options{}, retry.ErrRefused, "is running; only a failed, cancelled or compensating task is retried"},
		{"a speaker no voice has", compensating, retry.Options{Speaker: "zz9+nonexistent"}, nil, `speaker "zz9+nonexistent": no such voice (installed: `},
		{"a task that does not exist", uuid.New(), retry.Options{}, task.ErrNotFound, "no such task"},
		{"a child whose parent an operator cancelled", child, retry.Options{}, retry.ErrRefused, "was cancelled; retry the parent"},
	} {
		_, err := retry.Task(ctx, pool, c.id, c.opts)
		var refusal *admit.Error
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || (c.is == nil && !errors.As(err, &refusal)) ||
			!strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.is, c.text)
		}
	}
	if speakerOf(t, pool, muxed) != "es" || speakerOf(t, pool, compensating) != "es" {
		t.Errorf("a refused retry changed the speaker: %q, %q", speakerOf(t, pool, muxed), speakerOf(t, pool, compensating))
	}
}
