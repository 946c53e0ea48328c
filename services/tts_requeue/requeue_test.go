package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
)

type fixture struct {
	pool *pgxpool.Pool
	env  map[string]string
	ch   *amqp.Channel
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db := testenv.Postgres(t)
	url := testenv.AMQP(t)
	ch := testenv.Channel(t, url)
	if err := broker.Declare(ch); err != nil {
		t.Fatal(err)
	}
	return &fixture{pool: db.Pool, ch: ch, env: map[string]string{"DATABASE_URL": db.URL, "AMQP_URL": url}}
}

// task inserts a task past asr: status, updated idle ago, segments 0..n-1
// with audio except those in missing; translate succeeded when translated;
// a parked tts attempt when parked.
func (f *fixture) task(t *testing.T, status string, idle time.Duration, n int, missing []int, translated, parked bool) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := f.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO tasks (id, status, trace_id, updated_at) VALUES ($1, $2, 'trace-rq', now() - $3::interval)`, id, status, idle)
	for i := 0; i < n; i++ {
		key := wire.SegmentKey(id, i)
		for _, m := range missing {
			if m == i {
				key = ""
			}
		}
		exec(`INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key)
			VALUES ($1, $2, $3, $3 + 900, 'hello', 'hola', nullif($4, ''))`, id, i, i*1000, key)
	}
	exec(`INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', 'seg-0')`, id)
	tstatus := "failed"
	if translated {
		tstatus = "succeeded"
	}
	exec(`INSERT INTO task_steps (task_id, step, part, attempt, status) VALUES ($1, 'translate', 'seg-0', 1, $2)`, id, tstatus)
	if parked {
		env, err := wire.New(wire.StepTTS, id, "trace-rq", wire.TTS{TaskID: id, SpeakerID: "anna"})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := env.Marshal()
		exec(`INSERT INTO task_steps (task_id, step, attempt, status, message) VALUES ($1, 'tts', 1, 'parked', $2)`, id, body)
		for _, m := range missing {
			exec(`INSERT INTO tts_compensations (message_id, task_id, segment_idx, error, created_at)
				VALUES ($1, $2, $3, 'tts_service: 503', now())`, uuid.NewString(), id, m)
		}
	}
	return id
}

func (f *fixture) run(t *testing.T, args ...string) []compensation.Task {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append(args, "-json"), f.env, &out, io.Discard); err != nil {
		t.Fatalf("tts_requeue %v: %v", args, err)
	}
	var tasks []compensation.Task
	if err := json.Unmarshal(out.Bytes(), &tasks); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	return tasks
}

// messages drains task.tts.
func (f *fixture) messages(t *testing.T) []*wire.Envelope {
	t.Helper()
	return testenv.Drain(t, f.ch, wire.QueueTTS)
}

func (f *fixture) status(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var s string
	if err := f.pool.QueryRow(context.Background(), `SELECT status FROM tasks WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRequeueOneMessagePerTaskWithinTheLimit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.task(t, "compensating", time.Second, 4, []int{1, 2}, true, true)
	b := f.task(t, "compensating", time.Second, 3, []int{0}, true, true)
	// Every segment has audio by now (dubctl redub, say): re-driven too, it
	// moves on to mux_video instead of staying compensating forever.
	complete := f.task(t, "compensating", time.Hour, 2, nil, true, true)
	// Running tasks are the reconciler's: it re-drives a lost tts message,
	// and only when it is not waiting in task.tts.
	stalled := f.task(t, "running", time.Hour, 2, []int{0, 1}, true, false)
	busy := f.task(t, "running", 0, 2, []int{0, 1}, true, false)
	untranslated := f.task(t, "running", time.Hour, 2, []int{1}, false, false)

	dry := f.run(t, "-dry-run")
	got := map[uuid.UUID][]int{}
	for _, d := range dry {
		got[d.TaskID] = d.Missing
	}
	if _, ok := got[complete]; len(dry) != 3 || len(got[a]) != 2 || got[a][0] != 1 || got[a][1] != 2 || len(got[b]) != 1 || !ok {
		t.Errorf("dry run listed %+v; want a [1 2], b [0], complete []", dry)
	}
	if msgs := f.messages(t); len(msgs) != 0 || f.status(t, a) != "compensating" {
		t.Fatalf("dry run changed something: %d messages, task %s", len(msgs), f.status(t, a))
	}

	one := f.run(t, "-limit", "1")
	if len(one) != 1 {
		t.Fatalf("-limit 1 requeued %d tasks", len(one))
	}
	msgs := f.messages(t)
	if len(msgs) != 1 || msgs[0].TaskID != one[0].TaskID || msgs[0].Attempt != 2 {
		t.Fatalf("-limit 1 published %+v for %+v; want one tts message, attempt 2", msgs, one)
	}
	var payload wire.TTS
	if err := msgs[0].UnmarshalPayload(&payload); err != nil || payload.TaskID != msgs[0].TaskID {
		t.Errorf("payload %+v (%v)", payload, err)
	}

	rest := f.run(t)
	if len(rest) != 2 {
		t.Fatalf("second pass requeued %+v, want the two other compensating tasks", rest)
	}
	msgs = f.messages(t)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.TaskID.String())
	}
	sort.Strings(ids)
	if len(msgs) != 2 {
		t.Errorf("second pass published %v", ids)
	}
	for _, id := range []uuid.UUID{a, b, complete, stalled, busy, untranslated} {
		if s := f.status(t, id); s != "running" {
			t.Errorf("task %s is %s after requeue, want running", id, s)
		}
	}
	var pending int
	if err := f.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM tts_compensations WHERE task_id IN ($1, $2) AND requeued_at IS NULL`, a, b).Scan(&pending); err != nil || pending != 0 {
		t.Errorf("%d compensations not marked requeued (%v)", pending, err)
	}

	// The tasks are running now: without -running nothing is re-driven again.
	if again := f.run(t, "-min-idle", "0s"); len(again) != 0 {
		t.Errorf("third pass requeued %+v", again)
	}
	// -running takes running tasks missing audio (a, b, stalled, busy);
	// replays not claimed yet count: a second re-drive of a gets attempt 3.
	if again := f.run(t, "-running", "-min-idle", "0s"); len(again) != 4 {
		t.Fatalf("pass with -running requeued %+v", again)
	} else {
		for _, r := range again {
			if r.TaskID == a && r.Attempt != 3 {
				t.Errorf("second re-drive of %s got attempt %d, want 3", a, r.Attempt)
			}
		}
	}
}

// A segment tts skipped for its empty text (an empty tts_audio_key) has all the
// audio it will ever have: it is not missing, neither in a re-drive's list
// nor as the reason to re-drive a running task.
func TestSkippedSegmentsAreNotMissing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	skip := func(id uuid.UUID, idx int) {
		t.Helper()
		if _, err := f.pool.Exec(context.Background(), `UPDATE segments SET mt_text = '', tts_audio_key = '',
			tts_params_json = '{"skipped":"empty text"}' WHERE task_id = $1 AND idx = $2`, id, idx); err != nil {
			t.Fatal(err)
		}
	}
	comp := f.task(t, "compensating", time.Second, 3, []int{0, 2}, true, true)
	skip(comp, 0)
	onlySkipped := f.task(t, "running", time.Hour, 2, []int{1}, true, false)
	skip(onlySkipped, 1)

	dry := f.run(t, "-dry-run", "-running", "-min-idle", "0s")
	if len(dry) != 1 || dry[0].TaskID != comp || len(dry[0].Missing) != 1 || dry[0].Missing[0] != 2 {
		t.Fatalf("dry run listed %+v; want only %s missing [2]", dry, comp)
	}
}
