package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestRetryACompensatingTaskWithAnotherSpeaker: a task compensating
// because its speaker's segments could not be spoken is retried with
// another voice: a voice no tts engine announced is refused (400, the
// door's text), one it announced becomes the task's and its unspoken
// segments', its tts message is replayed with it and the task runs again;
// a task running is refused (409).
func TestRetryACompensatingTaskWithAnotherSpeaker(t *testing.T) {
	t.Parallel()
	f := setup(t)
	admittest.AnnounceInstalled(t, f.pool)
	ctx := context.Background()
	id := f.insertTask(t, "compensating", time.Now())
	for _, q := range []string{
		`UPDATE tasks SET speaker_id = 'zz9+nonexistent' WHERE id = $1`,
		`INSERT INTO task_steps (task_id, step, attempt, status, finished_at) VALUES
		    ($1, 'extract_audio', 1, 'succeeded', now()), ($1, 'asr', 1, 'succeeded', now()),
		    ($1, 'translate', 1, 'succeeded', now()), ($1, 'tts', 1, 'parked', now())`,
		`INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, speaker, voice, tts_audio_key) VALUES
		    ($1, 0, 0, 900, 'Hello.', 'Hola.', 'S1', 'zz9+nonexistent', NULL),
		    ($1, 1, 1000, 1900, 'Yes.', 'Sí.', 'S2', 'es+m3', 'tts/x/1.wav')`,
	} {
		if _, err := f.pool.Exec(ctx, q, id); err != nil {
			t.Fatal(err)
		}
	}
	path := "/api/tasks/" + id.String() + "/retry"
	var e struct{ Code, Message string }
	f.doJSON(t, "POST", path, map[string]string{"speaker": "zz9+other"}, http.StatusBadRequest, &e)
	if !strings.HasPrefix(e.Message, `speaker "zz9+other": no such voice (installed: `) {
		t.Fatalf("retry with a speaker no voice has: %+v", e)
	}
	var r retry.Retried
	f.doJSON(t, "POST", path, map[string]string{"speaker": "es+f3"}, http.StatusOK, &r)
	if r.Status != "running" || r.Speaker != "es+f3" || len(r.Replayed) != 1 || r.Replayed[0].Step != "tts" {
		t.Fatalf("retry with es+f3: %+v", r)
	}
	env, err := wire.Decode(f.next(t, "task.tts").Body)
	var p wire.TTS
	if err == nil {
		err = env.UnmarshalPayload(&p)
	}
	if err != nil || env.TaskID != id || p.SpeakerID != "es+f3" || env.Attempt != 2 {
		t.Fatalf("replayed tts message %+v %+v %v", env, p, err)
	}
	voices := map[int]string{}
	rows, err := f.pool.Query(ctx, `SELECT idx, voice FROM segments WHERE task_id = $1`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var idx int
		var v string
		if err := rows.Scan(&idx, &v); err != nil {
			t.Fatal(err)
		}
		voices[idx] = v
	}
	if voices[0] != "es+f3" || voices[1] != "es+m3" {
		t.Errorf("segment voices %v, want the unspoken one es+f3, the spoken one kept", voices)
	}
	// Running now: nothing to retry.
	f.doJSON(t, "POST", path, nil, http.StatusConflict, &e)
	if !strings.Contains(e.Message, "is running; only a failed, cancelled or compensating task is retried") {
		t.Errorf("retry of a running task: %+v", e)
	}
}
