package dub_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/task/tasktest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// doneTask makes a task that was dubbed: done, with three translated and
// synthesized segments.
func doneTask(t *testing.T, ctx context.Context, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	id := tasktest.Done(t, ctx, pool, "trace-dub")
	for i, text := range []string{"hola", "buenos días", "adiós"} {
		if _, err := pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text,
			tts_audio_key, tts_params_json, speaker, voice) VALUES ($1, $2, $3, $4, $5, $6, $7, '{"slot_ms": 900}', 'S1', 'es+m3')`,
			id, i*2, i*1000, i*1000+900, "source "+text, text, wire.SegmentKey(id, i*2)); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func TestSegmentsAndRedub(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testenv.Postgres(t).Pool
	id := doneTask(t, ctx, pool)

	segs, err := view.Segments(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 3 || segs[1].N != 2 || segs[1].Idx != 2 || *segs[1].Text != "buenos días" ||
		segs[1].Speaker != "S1" || segs[1].Voice != "es+m3" || !segs[1].Synthesized || string(segs[1].Fit) != `{"slot_ms": 900}` {
		t.Fatalf("segments: %+v", segs)
	}

	r, err := dub.Redub(ctx, pool, id, 2, "  buenas tardes ")
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 2 || r.Idx != 2 || r.Text != "buenas tardes" || *r.PreviousText != "buenos días" ||
		r.OutputVideoKey != wire.VersionKeys(id, 2).OutputVideo || len(r.Outbox) != 2 {
		t.Fatalf("redub: %+v", r)
	}
	// The task runs again; only segment 2 changed and lost its audio.
	var status string
	if err := pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&status); err != nil || status != task.Running {
		t.Fatalf("task status %q (%v), want running", status, err)
	}
	after, err := view.Segments(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range after {
		changed := *s.Text != *segs[i].Text || s.Synthesized != segs[i].Synthesized
		if changed != (i == 1) {
			t.Errorf("segment %d: before %+v after %+v", s.N, segs[i], s)
		}
	}
	checkTTSMessage(t, ctx, pool, id, r.Outbox[1])

	// A second re-dub waits for the first: the task is not done.
	if _, err := dub.Redub(ctx, pool, id, 1, "x"); !errors.Is(err, task.ErrRefused) {
		t.Fatalf("redub of a running task: %v, want refused", err)
	}
	vs, err := view.Versions(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Version != 1 || vs[0].OutputVideoKey != wire.DefaultKeys(id).OutputVideo ||
		vs[1].Version != 2 || vs[1].Ready || *vs[1].Segment != 2 || *vs[1].Text != "buenas tardes" {
		t.Fatalf("versions: %+v", vs)
	}
}

func TestRedubRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testenv.Postgres(t).Pool
	id := doneTask(t, ctx, pool)
	for _, tc := range []struct {
		n    int
		text string
		want error
	}{
		{0, "x", dub.ErrNoSegment},
		{4, "x", dub.ErrNoSegment},
		{1, strings.Repeat("a", dub.MaxTextLength+1), dub.ErrInvalidText},
		{1, "  ", dub.ErrInvalidText}, // a line is not made silent by mistake
		{1, "hola \u202eadiós", dub.ErrInvalidText},
		{1, "hola\n\n2\n00:00:00,000 --> 00:00:09,000\nfalse cue", dub.ErrInvalidText},
		{1, "caf\xe9", dub.ErrInvalidText},
		{1, "caf\ufffd", dub.ErrInvalidText},
	} {
		if _, err := dub.Redub(ctx, pool, id, tc.n, tc.text); !errors.Is(err, tc.want) {
			t.Errorf("redub segment %d: %v, want %v", tc.n, err, tc.want)
		}
	}
	if _, err := dub.Redub(ctx, pool, uuid.New(), 1, "x"); !errors.Is(err, dub.ErrNotFound) {
		t.Errorf("redub of a missing task: %v", err)
	}
	if _, err := view.Segments(ctx, pool, uuid.New()); !errors.Is(err, dub.ErrNotFound) {
		t.Errorf("segments of a missing task: %v", err)
	}
	// Nothing was changed by the refused re-dubs.
	var status string
	var versions int
	if err := pool.QueryRow(ctx, `SELECT status, (SELECT count(*) FROM output_versions WHERE task_id = $1)
		FROM tasks WHERE id = $1`, id).Scan(&status, &versions); err != nil || status != task.Done || versions != 0 {
		t.Fatalf("after refused re-dubs: status %q, %d versions (%v)", status, versions, err)
	}
}

// checkTTSMessage: one tts message for part v2 is in the outbox and
// recorded as a part of the step.
func checkTTSMessage(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id uuid.UUID, outboxID int64) {
	t.Helper()
	var body []byte
	if err := pool.QueryRow(ctx, `SELECT body FROM outbox WHERE id = $1`, outboxID).Scan(&body); err != nil {
		t.Fatal(err)
	}
	env, err := wire.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if part, _ := env.Part(); env.Step != wire.StepTTS || part != "v2" || env.Attempt != 1 || env.TraceID != "trace-dub" {
		t.Fatalf("tts message: %s", body)
	}
	var parts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM step_parts WHERE task_id = $1 AND step = 'tts' AND part = 'v2'
		AND message IS NOT NULL`, id).Scan(&parts); err != nil || parts != 1 {
		t.Fatalf("tts part v2 recorded %d times (%v)", parts, err)
	}
}
