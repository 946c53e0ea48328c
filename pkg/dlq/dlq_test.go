package dlq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
)

type fixture struct {
	pool *pgxpool.Pool
	pub  *broker.Publisher
	ch   *amqp.Channel
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	db := testenv.Postgres(t)
	url := testenv.AMQP(t)
	conn, pub := brokertest.Dial(t, url, "dlq-test")
	ch, err := conn.Channel(ctx)
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return &fixture{pool: db.Pool, pub: pub, ch: ch}
}

// failedTask inserts a failed task whose tts step failed attempts 1..4 and
// the dead letter of attempt 4; it returns the task and dead letter ids.
func (f *fixture) failedTask(t *testing.T, status string) (uuid.UUID, int64) {
	t.Helper()
	ctx := context.Background()
	id := uuid.New()
	if _, err := f.pool.Exec(ctx, `INSERT INTO tasks (id, status, error) VALUES ($1, $2, 'tts: boom')`, id, status); err != nil {
		t.Fatal(err)
	}
	env, err := wire.New(wire.StepTTS, id, "trace-dlq", wire.TTS{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	env.Attempt = 4
	body, _ := env.Marshal()
	for a := 1; a <= 4; a++ {
		if _, err := f.pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, error)
			VALUES ($1, 'tts', $2, 'failed', 'boom')`, id, a); err != nil {
			t.Fatal(err)
		}
	}
	return id, f.deadLetter(t, id, body)
}

func (f *fixture) deadLetter(t *testing.T, task uuid.UUID, original []byte) int64 {
	t.Helper()
	var orig *string
	if original != nil {
		s := string(original)
		orig = &s
	}
	var dl int64
	if err := f.pool.QueryRow(context.Background(), `INSERT INTO dead_letters
		(message_id, task_id, step, attempt, error_class, failure_reason, original_message, source)
		VALUES ($1, $2, 'tts', 4, 'transient', 'boom (gave up after 4 tries)', $3::jsonb, 'service') RETURNING id`,
		uuid.NewString(), task, orig).Scan(&dl); err != nil {
		t.Fatal(err)
	}
	return dl
}

// next reads the next message of task.tts.
func (f *fixture) next(t *testing.T) *wire.Envelope {
	t.Helper()
	var d amqp.Delivery
	testenv.EventuallyWithin(t, 10*time.Second, "a message in task.tts", func() bool {
		got, ok, err := f.ch.Get(wire.QueueTTS, true)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		d = got
		return ok
	})
	env, err := wire.Decode(d.Body)
	if err != nil {
		t.Fatalf("replayed message: %v", err)
	}
	return env
}

func (f *fixture) empty(t *testing.T) {
	t.Helper()
	q, err := f.ch.QueueDeclarePassive(wire.QueueTTS, true, false, false, false, amqp.Table{})
	if err != nil {
		t.Fatalf("inspect task.tts: %v", err)
	}
	if q.Messages != 0 {
		t.Errorf("task.tts holds %d more messages, want none", q.Messages)
	}
}

func TestReplayRepublishesWithAFreshBudgetOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	task, id := f.failedTask(t, "failed")

	r, err := dlq.Replay(ctx, f.pool, f.pub, id, dlq.Options{})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if r.TaskID != task || r.Step != wire.StepTTS || r.Attempt != 5 {
		t.Errorf("replayed %+v, want task %s tts attempt 5", r, task)
	}
	env := f.next(t)
	if env.TaskID != task || env.Step != wire.StepTTS || env.Attempt != 5 || env.TraceID != "trace-dlq" {
		t.Errorf("message %+v", env)
	}
	var base int
	if err := f.pool.QueryRow(ctx, `SELECT base_attempt FROM step_replays WHERE task_id = $1 AND step = 'tts'`, task).
		Scan(&base); err != nil || base != 5 {
		t.Errorf("fresh budget base %d (%v), want 5", base, err)
	}
	var history int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1`, task).Scan(&history); err != nil || history != 4 {
		t.Errorf("history %d rows (%v), want the 4 attempts kept", history, err)
	}
	var status, errText string
	if err := f.pool.QueryRow(ctx, `SELECT status, error FROM tasks WHERE id = $1`, task).Scan(&status, &errText); err != nil ||
		status != "running" || errText != "" {
		t.Errorf("task %s %q (%v), want running without error", status, errText, err)
	}
	d, err := view.GetDeadLetter(ctx, f.pool, id)
	if err != nil || d.ReplayedAt == nil || d.ReplayCount != 1 || d.Replayable() {
		t.Errorf("dead letter after replay: %+v (%v)", d, err)
	}

	// Not twice by accident.
	if _, err := dlq.Replay(ctx, f.pool, f.pub, id, dlq.Options{}); !errors.Is(err, dlq.ErrReplayed) {
		t.Errorf("second replay: %v, want ErrReplayed", err)
	}
	if all, err := dlq.ReplayAll(ctx, f.pool, f.pub, ""); err != nil || len(all) != 0 {
		t.Errorf("replay --all after replay: %+v, %v; want nothing", all, err)
	}
	f.empty(t)
	// On purpose.
	r, err = dlq.Replay(ctx, f.pool, f.pub, id, dlq.Options{Force: true})
	if err != nil || r.Attempt != 6 {
		t.Errorf("forced replay: %+v, %v; want attempt 6", r, err)
	}
	if env := f.next(t); env.Attempt != 6 {
		t.Errorf("forced replay published attempt %d", env.Attempt)
	}
}

func TestReplayAllOncePerPartAndRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	task, first := f.failedTask(t, "failed")
	// The broker's dead letter of the same message.
	d, err := view.GetDeadLetter(ctx, f.pool, first)
	if err != nil {
		t.Fatal(err)
	}
	second := f.deadLetter(t, task, d.OriginalMessage)
	doneTask, doneDL := f.failedTask(t, "done")
	noOriginal := f.deadLetter(t, task, nil)

	got, err := dlq.ReplayAll(ctx, f.pool, f.pub, wire.StepTTS)
	if !errors.Is(err, dlq.ErrTaskDone) || !errors.Is(err, dlq.ErrNotReplayable) {
		t.Errorf("replay --all error %v, want the done task and the unreadable dead letter reported", err)
	}
	if len(got) != 2 || got[0].ID != first || got[0].Attempt != 5 || got[1].ID != second || got[1].Attempt != 0 {
		t.Errorf("replayed %+v, want %d republished and %d marked with it", got, first, second)
	}
	if env := f.next(t); env.TaskID != task || env.Attempt != 5 {
		t.Errorf("message %+v", env)
	}
	f.empty(t)
	for id, want := range map[int64]bool{first: true, second: true, doneDL: false, noOriginal: false} {
		d, err := view.GetDeadLetter(ctx, f.pool, id)
		if err != nil {
			t.Fatal(err)
		}
		if (d.ReplayedAt != nil) != want {
			t.Errorf("dead letter %d replayed=%v, want %v", id, d.ReplayedAt != nil, want)
		}
	}
	var status string
	if err := f.pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, doneTask).Scan(&status); err != nil || status != "done" {
		t.Errorf("done task %s (%v)", status, err)
	}
	if _, err := dlq.Replay(ctx, f.pool, f.pub, 999999, dlq.Options{}); !errors.Is(err, dlq.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	list, err := view.DeadLetters(ctx, f.pool, view.DeadLetterFilter{Step: wire.StepTTS, Pending: true})
	if err != nil || len(list) != 2 {
		t.Errorf("pending list %+v (%v), want the two not replayed", list, err)
	}
	list, err = view.DeadLetters(ctx, f.pool, view.DeadLetterFilter{Since: time.Now().Add(time.Hour)})
	if err != nil || len(list) != 0 {
		t.Errorf("list since the future: %d (%v)", len(list), err)
	}
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"2h":                   now.Add(-2 * time.Hour),
		"7d":                   now.AddDate(0, 0, -7),
		"2026-03-01T00:00:00Z": time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, err := dlq.ParseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "-2h", "1.5d", "d"} {
		if _, err := dlq.ParseSince(bad, now); err == nil {
			t.Errorf("ParseSince(%q) accepted", bad)
		}
	}
}
