package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

type fixture struct {
	pool *pgxpool.Pool
	url  string
	db   *testenv.Database
	pub  *broker.Publisher
	ch   *amqp.Channel
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	db := testenv.Postgres(t)
	url := testenv.AMQP(t)
	conn, err := broker.Dial(ctx, url, "reconciler-test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	pub := broker.NewPublisher(conn)
	ch, err := conn.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{pool: db.Pool, db: db, url: url, pub: pub, ch: ch}
}

func (f *fixture) reconciler() *reconciler {
	return &reconciler{pool: f.pool, pub: f.pub, set: Settings{StuckTask: 10 * time.Minute, LeaseGrace: time.Minute,
		OutboxAge: 30 * time.Second, Batch: 100}}
}

func (f *fixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (f *fixture) task(t *testing.T, idle time.Duration) uuid.UUID {
	t.Helper()
	id := uuid.New()
	f.exec(t, `INSERT INTO tasks (id, status, trace_id, source_language, target_language, updated_at)
		VALUES ($1, 'running', 'trace-rc', 'en', 'es', now() - $2::interval)`, id, idle)
	return id
}

func (f *fixture) attempt(t *testing.T, task uuid.UUID, env *wire.Envelope, part, status string, leaseAgo time.Duration) {
	t.Helper()
	var body []byte
	if env != nil {
		body, _ = env.Marshal()
	}
	f.exec(t, `INSERT INTO task_steps (task_id, step, part, attempt, status, lease_until, message)
		VALUES ($1, $2, $3, $4, $5, CASE WHEN $5 = 'running' THEN now() - $6::interval END, $7)`,
		task, env.Step, part, env.Attempt, status, leaseAgo, body)
}

func message(t *testing.T, stepName string, task uuid.UUID, payload any) *wire.Envelope {
	t.Helper()
	env, err := wire.New(stepName, task, "trace-rc", payload)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// drain returns the messages waiting in queue.
func (f *fixture) drain(t *testing.T, queue string) []*wire.Envelope {
	t.Helper()
	var out []*wire.Envelope
	for {
		d, ok, err := f.ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		env, err := wire.Decode(d.Body)
		if err != nil {
			t.Fatalf("message in %s: %v", queue, err)
		}
		out = append(out, env)
	}
}

func count(acts []Action, kind string) int {
	n := 0
	for _, a := range acts {
		if a.Kind == kind {
			n++
		}
	}
	return n
}

func TestExpiredLeaseIsClosedAndReplayed(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	dead := f.task(t, time.Minute)
	keys := wire.DefaultKeys(dead)
	asr := message(t, wire.StepASR, dead, wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
	f.attempt(t, dead, asr, "", "running", 2*time.Minute)
	// A lease that ran out a moment ago is left to the broker's redelivery.
	recent := f.task(t, time.Minute)
	f.attempt(t, recent, message(t, wire.StepTTS, recent, wire.TTS{TaskID: recent}), "", "running", time.Second)

	acts, err := f.reconciler().pass(ctx)
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	if count(acts, actionLease) != 1 || len(acts) != 1 || acts[0].TaskID != dead || acts[0].Attempt != 2 {
		t.Fatalf("actions %+v, want the asr lease re-driven as attempt 2", acts)
	}
	msgs := f.drain(t, broker.QueueASR)
	if len(msgs) != 1 || msgs[0].TaskID != dead || msgs[0].Attempt != 2 || msgs[0].TraceID != "trace-rc" {
		t.Fatalf("task.asr holds %+v", msgs)
	}
	var status, errText string
	if err := f.pool.QueryRow(ctx, `SELECT status, error FROM task_steps WHERE task_id = $1 AND attempt = 1`, dead).
		Scan(&status, &errText); err != nil || status != "failed" || !strings.Contains(errText, "lease expired") {
		t.Errorf("expired attempt %s %q (%v)", status, errText, err)
	}
	if n := len(f.drain(t, broker.QueueTTS)); n != 0 {
		t.Errorf("the recent lease was re-driven (%d messages)", n)
	}
	// Idempotent: the next pass finds nothing.
	if acts, err := f.reconciler().pass(ctx); err != nil || len(acts) != 0 {
		t.Errorf("second pass: %+v, %v", acts, err)
	}
}

func TestOutboxLeftBehindIsPublished(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	task := f.task(t, 0)
	keys := wire.DefaultKeys(task)
	mux := message(t, wire.StepMuxVideo, task, wire.MuxVideo{TaskID: task, SourceVideoKey: keys.SourceVideo,
		TTSAudioKey: keys.DubAudio, OutputVideoKey: keys.OutputVideo})
	body, _ := mux.Marshal()
	f.exec(t, `INSERT INTO outbox (message_id, exchange, routing_key, body, created_at)
		VALUES ($1, $2, 'task.mux_video', $3, now() - interval '5 minutes')`, uuid.New(), wire.Exchange, body)
	f.exec(t, `INSERT INTO outbox (message_id, exchange, routing_key, body)
		VALUES ($1, $2, 'task.mux_video', $3)`, uuid.New(), wire.Exchange, body) // fresh: the worker's own

	acts, err := f.reconciler().pass(ctx)
	if err != nil || count(acts, actionOutbox) != 1 || len(acts) != 1 {
		t.Fatalf("pass: %+v, %v", acts, err)
	}
	if msgs := f.drain(t, broker.QueueMuxVideo); len(msgs) != 1 || msgs[0].TaskID != task {
		t.Errorf("task.mux_video holds %+v", msgs)
	}
	var left int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&left); err != nil || left != 1 {
		t.Errorf("%d outbox rows left (%v), want the fresh one", left, err)
	}
}

func TestStuckTasksAreRedrivenFromTheStepTheyWaitFor(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	// asr never ran: its message is rebuilt from the task row.
	lostASR := f.task(t, time.Hour)
	keys := wire.DefaultKeys(lostASR)
	f.attempt(t, lostASR, message(t, wire.StepExtractAudio, lostASR,
		wire.ExtractAudio{SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio}), "", "succeeded", 0)
	// translate: one part done, one whose retry was lost, one never ran.
	trans := f.task(t, time.Hour)
	for _, s := range []string{wire.StepExtractAudio, wire.StepASR} {
		f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status) VALUES ($1, $2, 1, 'succeeded')`, trans, s)
	}
	for _, p := range []string{"seg-0", "seg-1", "seg-2,seg-3"} {
		f.exec(t, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', $2)`, trans, p)
	}
	tr := func(ids ...string) *wire.Envelope {
		return message(t, wire.StepTranslate, trans, wire.Translate{TaskID: trans, SegmentIDs: ids,
			SourceLanguage: "en", TargetLanguage: "es"})
	}
	f.attempt(t, trans, tr("seg-0"), "seg-0", "succeeded", 0)
	f.attempt(t, trans, tr("seg-1"), "seg-1", "failed", 0)
	// Parked: left to tts_requeue. Fresh: left alone.
	parked := f.task(t, time.Hour)
	for _, s := range []string{wire.StepExtractAudio, wire.StepASR, wire.StepTranslate} {
		f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status) VALUES ($1, $2, 1, 'succeeded')`, parked, s)
	}
	f.attempt(t, parked, message(t, wire.StepTTS, parked, wire.TTS{TaskID: parked}), "", "parked", 0)
	fresh := f.task(t, time.Second)
	// Dead-lettered: left to the operator's dubctl dlq replay.
	dead := f.task(t, time.Hour)
	f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status) VALUES ($1, 'extract_audio', 1, 'succeeded')`, dead)
	deadKeys := wire.DefaultKeys(dead)
	f.attempt(t, dead, message(t, wire.StepASR, dead, wire.ASR{AudioKey: deadKeys.SourceAudio, Language: "en",
		OutputKey: deadKeys.ASR}), "", "failed", 0)
	f.exec(t, `INSERT INTO dead_letters (message_id, task_id, step, attempt) VALUES ('x', $1, 'asr', 1)`, dead)

	// Several replicas at once re-drive each thing once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acts []Action
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := f.reconciler().pass(ctx)
			if err != nil {
				t.Errorf("pass: %v", err)
			}
			mu.Lock()
			acts = append(acts, a...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := count(acts, actionStuck); n != 3 {
		t.Errorf("%d re-drives, want 3 (asr, translate seg-1 and seg-2,seg-3): %+v", n, acts)
	}
	if n := count(acts, actionUnrecoverable); n != 2 {
		t.Errorf("%d reports, want the parked tts and the dead-lettered asr: %+v", n, acts)
	}
	asr := f.drain(t, broker.QueueASR)
	if len(asr) != 1 || asr[0].TaskID != lostASR || asr[0].Attempt != 2 {
		t.Errorf("task.asr holds %+v", asr)
	} else {
		var p wire.ASR
		if err := asr[0].UnmarshalPayload(&p); err != nil || p.AudioKey != keys.SourceAudio || p.OutputKey != keys.ASR {
			t.Errorf("rebuilt asr payload %+v (%v)", p, err)
		}
	}
	parts := map[string]int{}
	for _, m := range f.drain(t, broker.QueueTranslate) {
		var p wire.Translate
		if err := m.UnmarshalPayload(&p); err != nil {
			t.Fatal(err)
		}
		parts[strings.Join(p.SegmentIDs, ",")] = m.Attempt
	}
	if len(parts) != 2 || parts["seg-1"] != 2 || parts["seg-2,seg-3"] != 2 {
		t.Errorf("translate re-drives %v, want both as attempt 2 (step.Replay numbers after the message's own attempt)", parts)
	}
	if n := len(f.drain(t, broker.QueueTTS)); n != 0 {
		t.Errorf("parked tts re-driven %d times", n)
	}
	_ = fresh
	// updated_at moved: the next pass waits STUCK_TASK_SECONDS again.
	if again, err := f.reconciler().pass(ctx); err != nil || len(again) != 0 {
		t.Errorf("immediate second pass: %+v, %v", again, err)
	}
}

func TestServiceServesMetricsAndReconciles(t *testing.T) {
	f := setup(t)
	task := f.task(t, time.Hour) // queued work lost: extract_audio never ran
	f.exec(t, `UPDATE tasks SET status = 'queued' WHERE id = $1`, task)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, map[string]string{"DATABASE_URL": f.db.URL, "AMQP_URL": f.url, "OPS_ADDR": addr,
			"RECONCILE_INTERVAL_SECONDS": "0.2", "STUCK_TASK_SECONDS": "60"}, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var msgs []*wire.Envelope
	deadline := time.Now().Add(30 * time.Second)
	for len(msgs) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		msgs = f.drain(t, broker.QueueExtractAudio)
	}
	if len(msgs) != 1 || msgs[0].TaskID != task {
		t.Fatalf("task.extract_audio holds %+v", msgs)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `dubflow_reconciler_actions_total{action="task_redriven",step="extract_audio"} 1`) {
		t.Errorf("metrics do not count the re-drive:\n%s", grep(string(b), "dubflow_reconciler"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
