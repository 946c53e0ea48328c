package browsertest

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestRetryWithAnotherVoiceInBrowser: a task compensating because its
// speaker is no voice (left by an earlier door) offers Retry and a voice
// field on its page; a voice no tts worker announced is refused with the
// submit's text, an announced one retries the task — running again, with
// that voice recorded.
func TestRetryWithAnotherVoiceInBrowser(t *testing.T) {
	needBrowser(t)
	s := newStackOf(t, []string{"console"}, nil)
	admittest.AnnounceInstalled(t, s.db.Pool)
	id := s.compensating(t)
	b := newBrowser(t, s.console)
	b.login(s.token)
	b.visit("/tasks/"+id.String(), "#task-status .badge")
	b.waitFor(`!document.querySelector('#retry').disabled && !document.querySelector('#retry-speaker').disabled`, 30*time.Second)
	b.run(10*time.Second, "retry with a voice no engine has", chromedp.SetValue(chromedp.CSS("#retry-speaker"), "zz9+other"),
		chromedp.Click(chromedp.CSS("#retry")))
	b.waitFor(`[...document.querySelectorAll('#flash .bad')].some(e => e.textContent.startsWith('speaker "zz9+other": no such voice (installed: '))`, 10*time.Second)
	b.shot("retry-refused")
	b.run(10*time.Second, "retry with es+f3", chromedp.SetValue(chromedp.CSS("#retry-speaker"), "es+f3"), chromedp.Click(chromedp.CSS("#retry")))
	b.waitFor(`[...document.querySelectorAll('#flash div')].some(e => e.textContent === 'Retrying with the voice es+f3')`, 10*time.Second)
	b.waitTaskStatus(id.String(), "running", 30*time.Second)
	b.shot("retried")
	var speaker string
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT speaker_id FROM tasks WHERE id = $1`, id).Scan(&speaker); err != nil || speaker != "es+f3" {
		t.Errorf("the task's speaker is %q (%v), want es+f3", speaker, err)
	}
	b.checkNoPageErrors()
}

// compensating makes a task waiting in compensating: its first speaker's
// voice is none (zz9+nonexistent), that speaker's line has no audio.
func (s *stack) compensating(t *testing.T) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO tasks (id, status, source_language, target_language, speaker_id, source_video_key, output_video_key, error)
		  VALUES ($1, 'compensating', 'en', 'es', 'zz9+nonexistent', $2, $3, 'tts: speech synthesis failed for 1 segment')`,
			[]any{id, keys.SourceVideo, keys.OutputVideo}},
		{`INSERT INTO task_steps (task_id, step, attempt, status, finished_at) VALUES
		    ($1, 'extract_audio', 1, 'succeeded', now()), ($1, 'asr', 1, 'succeeded', now()),
		    ($1, 'translate', 1, 'succeeded', now()), ($1, 'tts', 1, 'parked', now())`, []any{id}},
		{`INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, speaker, voice) VALUES
		    ($1, 0, 0, 900, 'Hello.', 'Hola.', 'S1', 'zz9+nonexistent')`, []any{id}},
	} {
		if _, err := s.db.Pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%.40s: %v", q.sql, err)
		}
	}
	return id
}
