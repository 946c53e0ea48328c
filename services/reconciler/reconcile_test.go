package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

type fixture struct {
	pool *pgxpool.Pool
	url  string
	db   *testenv.Database
	conn *broker.Conn
	pub  *broker.Publisher
	ch   *amqp.Channel
}

// TestMain runs up to 4 tests at once: each has its own database and
// virtual host (setup) and spends its time waiting on them.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 4))
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db := testenv.Postgres(t)
	url := testenv.AMQP(t)
	conn, pub := brokertest.Dial(t, url, "reconciler-test")
	ch, err := conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{pool: db.Pool, db: db, url: url, conn: conn, pub: pub, ch: ch}
}

// reconciler returns a reconciler as a replica would run it (each call is
// another replica: its own memory of suspects).
func (f *fixture) reconciler() *reconciler {
	return &reconciler{pool: f.pool, pub: f.pub, depths: brokerDepths(f.conn, broker.DefaultDelayTiers),
		set: Settings{StuckTask: 10 * time.Minute, LeaseGrace: time.Minute, Settle: settle, OutboxAge: 30 * time.Second,
			TaskMaxIdle: 24 * time.Hour, CompensatingMax: 72 * time.Hour, Batch: 100}}
}

// at sets rec's clock to the database's clock moved by d: the passes judge
// ages and leases as if d had passed.
func at(t *testing.T, f *fixture, rec *reconciler, d time.Duration) {
	t.Helper()
	var now time.Time
	if err := f.pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	rec.now = testenv.NewClock(now.Add(d)).Now
}

// passes runs n passes of rec and returns every action.
func passes(t *testing.T, rec *reconciler, n int) []Action {
	t.Helper()
	var all []Action
	for range n {
		acts, err := rec.runOnce(context.Background())
		if err != nil {
			t.Fatalf("pass: %v", err)
		}
		all = append(all, acts...)
	}
	return all
}

// publish puts env in its work queue, confirmed.
func (f *fixture) publish(t *testing.T, env *wire.Envelope) {
	t.Helper()
	body, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.pub.Publish(context.Background(), wire.Exchange, wire.RoutingKey(env.Step),
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body}); err != nil {
		t.Fatal(err)
	}
}

// depth returns the ready messages of queue.
func (f *fixture) depth(t *testing.T, queue string) int {
	t.Helper()
	q, err := f.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// waitDepth waits (bounded) until queue holds n ready messages.
func (f *fixture) waitDepth(t *testing.T, queue string, n int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%s to hold %d messages", queue, n), func() bool { return f.depth(t, queue) == n })
}

// emit records that step's part of task was emitted queuedAgo with env as
// its message, as the runtime's Emit does.
func (f *fixture) emit(t *testing.T, env *wire.Envelope, queuedAgo time.Duration) {
	t.Helper()
	part, err := step.PartOf(env)
	if err != nil {
		t.Fatal(err)
	}
	body, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := step.AddPart(context.Background(), f.pool, env.TaskID, env.Step, part, body); err != nil {
		t.Fatal(err)
	}
	f.exec(t, `UPDATE step_parts SET created_at = now() - $4::interval WHERE task_id = $1 AND step = $2 AND part = $3`,
		env.TaskID, env.Step, part, queuedAgo)
}

// succeeded records that steps of task succeeded.
func (f *fixture) succeeded(t *testing.T, task uuid.UUID, steps ...string) {
	t.Helper()
	for _, s := range steps {
		f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, started_at, finished_at)
			VALUES ($1, $2, 1, 'succeeded', now() - interval '2 hours', now() - interval '2 hours')`, task, s)
	}
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
	f.exec(t, `INSERT INTO tasks (id, status, trace_id, source_language, target_language, created_at, updated_at)
		VALUES ($1, 'running', 'trace-rc', 'en', 'es', now() - $2::interval, now() - $2::interval)`, id, idle)
	return id
}

func (f *fixture) attempt(t *testing.T, task uuid.UUID, env *wire.Envelope, part, status string, leaseAgo time.Duration) {
	t.Helper()
	var body []byte
	if env != nil {
		body, _ = env.Marshal()
	}
	f.exec(t, `INSERT INTO task_steps (task_id, step, part, attempt, status, lease_until, message, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, CASE WHEN $5 = 'running' THEN now() - $6::interval END, $7,
		        now() - interval '2 hours', CASE WHEN $5 <> 'running' THEN now() - interval '2 hours' END)`,
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
	return testenv.Drain(t, f.ch, queue)
}

func count(acts []Action, kind string) int {
	n := 0
	for _, a := range acts {
		if a.Kind == kind {
			n += a.n()
		}
	}
	return n
}

// asrOf returns the first asr message of task.
func asrOf(t *testing.T, task uuid.UUID) *wire.Envelope {
	t.Helper()
	keys := wire.DefaultKeys(task)
	return message(t, wire.StepASR, task, wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
}

// A backlog is waiting, not loss. 200 tasks whose asr
// messages wait in task.asr (no worker consumes them) for far longer than
// STUCK_TASK_SECONDS draw no re-publish; a message really lost (its part
// queued, nothing in any queue or the outbox, no activity) is re-driven
// once, as soon as the queue moves past it.
func TestBacklogIsNotRedrivenALostMessageIsOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const backlog = 200
	waiting := map[uuid.UUID]bool{}
	for range backlog {
		task := f.task(t, time.Hour)
		f.succeeded(t, task, wire.StepExtractAudio)
		asr := asrOf(t, task)
		f.emit(t, asr, time.Hour)
		f.publish(t, asr)
		waiting[task] = true
	}
	f.waitDepth(t, wire.QueueASR, backlog)
	rec := f.reconciler()
	acts := passes(t, rec, 3)
	if n := count(acts, actionStuck) + count(acts, actionLease) + count(acts, actionSuspect); n != 0 {
		t.Fatalf("%d re-drives or suspicions of parts only waiting in task.asr: %+v", n, acts)
	}
	if n := count(acts, actionWaiting); n != 3*backlog {
		t.Errorf("skipped_waiting counted %d parts over 3 passes, want %d", n, 3*backlog)
	}
	if n := f.depth(t, wire.QueueASR); n != backlog {
		t.Fatalf("task.asr holds %d messages after the passes, want the %d of the backlog", n, backlog)
	}

	// Lost: emitted before the backlog, never published (or lost on the
	// way). While the queue does not move, nothing tells which part lacks
	// its message: nothing is re-driven.
	lost := f.task(t, 3*time.Hour)
	f.succeeded(t, lost, wire.StepExtractAudio)
	f.emit(t, asrOf(t, lost), 2*time.Hour)
	if acts := passes(t, rec, 3); count(acts, actionStuck)+count(acts, actionSuspect) != 0 {
		t.Fatalf("re-drives while task.asr does not move: %+v", acts)
	}
	// A worker takes ten messages of the backlog (emitted after the lost
	// one): the lost part was overtaken, its message is not in the queue.
	for range 10 {
		d, ok, err := f.ch.Get(wire.QueueASR, false)
		if err != nil || !ok {
			t.Fatalf("get from task.asr: %v %v", ok, err)
		}
		env, err := wire.Decode(d.Body)
		if err != nil {
			t.Fatal(err)
		}
		f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, started_at, finished_at)
			VALUES ($1, 'asr', 1, 'succeeded', now(), now())`, env.TaskID)
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
		delete(waiting, env.TaskID)
	}
	acts = passes(t, rec, 4)
	if n := count(acts, actionStuck); n != 1 {
		t.Fatalf("%d re-drives, want 1 (the lost asr): %+v", n, acts)
	}
	for _, a := range acts {
		if a.Kind == actionStuck && (a.TaskID != lost || a.Attempt != 2) {
			t.Errorf("re-drove %+v, want the lost task's asr as attempt 2", a)
		}
	}
	f.waitDepth(t, wire.QueueASR, backlog-10+1)
	got := map[uuid.UUID]int{}
	for _, m := range f.drain(t, wire.QueueASR) {
		got[m.TaskID]++
	}
	if got[lost] != 1 || len(got) != backlog-10+1 {
		t.Errorf("task.asr holds the lost task %d times and %d tasks, want once and %d", got[lost], len(got), backlog-10+1)
	}
	for task := range waiting {
		if got[task] != 1 {
			t.Errorf("waiting task %s has %d messages in task.asr, want its one", task, got[task])
		}
	}
	if n, err := step.CountNeedlessRedrives(context.Background(), f.pool); err != nil || n != 0 {
		t.Errorf("needless re-drives %d (%v), want 0", n, err)
	}
}

// A held part whose worker died: while its message is back in the queue
// the broker redelivers it (no re-drive); when it is nowhere, the attempt is
// closed and the message replayed once. Attempts of ended tasks are closed
// without a re-drive; a lease that ran out a moment ago is left alone.
func TestExpiredLeaseIsRedrivenOnlyWhenItsMessageIsGone(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dead := f.task(t, time.Hour)
	f.succeeded(t, dead, wire.StepExtractAudio)
	asr := asrOf(t, dead)
	f.attempt(t, dead, asr, "", "running", 2*time.Minute)
	// Its worker died and the broker put the message back: it waits.
	queued := f.task(t, time.Hour)
	f.succeeded(t, queued, wire.StepExtractAudio, wire.StepASR, wire.StepTranslate)
	tts := message(t, wire.StepTTS, queued, wire.TTS{TaskID: queued})
	f.attempt(t, queued, tts, "", "running", 2*time.Minute)
	f.publish(t, tts)
	f.waitDepth(t, wire.QueueTTS, 1)
	// A lease that ran out a moment ago is left to the broker's redelivery.
	recent := f.task(t, time.Hour)
	f.succeeded(t, recent, wire.StepExtractAudio)
	f.attempt(t, recent, asrOf(t, recent), "", "running", time.Second)
	// The task ended: the attempt is closed, nothing re-driven.
	ended := f.task(t, time.Hour)
	f.exec(t, `UPDATE tasks SET status = 'done' WHERE id = $1`, ended)
	endedKeys := wire.DefaultKeys(ended)
	f.attempt(t, ended, message(t, wire.StepMuxVideo, ended, wire.MuxVideo{TaskID: ended, SourceVideoKey: endedKeys.SourceVideo,
		TTSAudioKey: endedKeys.DubAudio, OutputVideoKey: endedKeys.OutputVideo}), "", "running", 2*time.Minute)
	// A cancelled task has ended too.
	cancelled := f.task(t, time.Hour)
	f.exec(t, `UPDATE tasks SET status = 'cancelled', error = 'cancelled: operator' WHERE id = $1`, cancelled)
	cancelledKeys := wire.DefaultKeys(cancelled)
	f.attempt(t, cancelled, message(t, wire.StepMuxVideo, cancelled, wire.MuxVideo{TaskID: cancelled,
		SourceVideoKey: cancelledKeys.SourceVideo, TTSAudioKey: cancelledKeys.DubAudio,
		OutputVideoKey: cancelledKeys.OutputVideo}), "", "running", 2*time.Minute)

	acts := passes(t, f.reconciler(), 3)
	if count(acts, actionLease) != 1 || count(acts, actionStuck) != 0 || count(acts, actionClosed) != 2 {
		t.Fatalf("actions %+v, want the dead asr lease re-driven and the ended tasks' attempts closed", acts)
	}
	for _, a := range acts {
		if a.Kind == actionLease && (a.TaskID != dead || a.Attempt != 2) {
			t.Errorf("re-drove %+v, want the dead asr as attempt 2", a)
		}
	}
	msgs := f.drain(t, wire.QueueASR)
	if len(msgs) != 1 || msgs[0].TaskID != dead || msgs[0].Attempt != 2 || msgs[0].TraceID != "trace-rc" {
		t.Fatalf("task.asr holds %+v", msgs)
	}
	var status, errText string
	if err := f.pool.QueryRow(ctx, `SELECT status, error FROM task_steps WHERE task_id = $1 AND step = 'asr' AND attempt = 1`, dead).
		Scan(&status, &errText); err != nil || status != "failed" || !strings.Contains(errText, "lease expired") {
		t.Errorf("expired attempt %s %q (%v)", status, errText, err)
	}
	if n := f.depth(t, wire.QueueTTS); n != 1 {
		t.Errorf("task.tts holds %d messages, want only the one waiting", n)
	}
	if err := f.pool.QueryRow(ctx, `SELECT status FROM task_steps WHERE task_id = $1 AND step = 'mux_video'`, ended).
		Scan(&status); err != nil || status != "failed" {
		t.Errorf("attempt of the ended task is %s (%v), want closed", status, err)
	}
	if err := f.pool.QueryRow(ctx, `SELECT status FROM task_steps WHERE task_id = $1 AND step = 'mux_video'`, cancelled).
		Scan(&status); err != nil || status != "failed" {
		t.Errorf("attempt of the cancelled task is %s (%v), want closed", status, err)
	}
	if err := f.pool.QueryRow(ctx, `SELECT status FROM task_steps WHERE task_id = $1 AND step = 'asr'`, recent).
		Scan(&status); err != nil || status != "running" {
		t.Errorf("recent lease is %s (%v), want left running", status, err)
	}

	// Two minutes later (the clock moved, nothing slept) the recent lease
	// ran out long enough ago: suspected at one pass, re-driven at the next.
	rec := f.reconciler()
	at(t, f, rec, 2*time.Minute)
	acts = passes(t, rec, 2)
	if count(acts, actionSuspect) != 1 || count(acts, actionLease) != 1 {
		t.Fatalf("actions two minutes later %+v, want the recent lease suspected, then re-driven", acts)
	}
	for _, a := range acts {
		if a.Kind == actionLease && (a.TaskID != recent || a.Attempt != 2) {
			t.Errorf("re-drove %+v, want the recent asr as attempt 2", a)
		}
	}
	if err := f.pool.QueryRow(ctx, `SELECT status FROM task_steps WHERE task_id = $1 AND step = 'asr' AND attempt = 1`, recent).
		Scan(&status); err != nil || status != "failed" {
		t.Errorf("recent lease is %s (%v) two minutes later, want closed", status, err)
	}
	if msgs := f.drain(t, wire.QueueASR); len(msgs) != 1 || msgs[0].TaskID != recent || msgs[0].Attempt != 2 {
		t.Errorf("task.asr holds %+v, want the recent asr as attempt 2", msgs)
	}
}

func TestOutboxLeftBehindIsPublished(t *testing.T) {
	t.Parallel()
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

	acts, err := f.reconciler().runOnce(ctx)
	if err != nil || count(acts, actionOutbox) != 1 || len(acts) != 1 {
		t.Fatalf("pass: %+v, %v", acts, err)
	}
	if msgs := f.drain(t, wire.QueueMuxVideo); len(msgs) != 1 || msgs[0].TaskID != task {
		t.Errorf("task.mux_video holds %+v", msgs)
	}
	var left int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&left); err != nil || left != 1 {
		t.Errorf("%d outbox rows left (%v), want the fresh one", left, err)
	}
}

func TestLostMessagesAreRedrivenFromWhatWasEmitted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	// asr never ran and its part predates step_parts.message: rebuilt
	// from the task row.
	lostASR := f.task(t, time.Hour)
	keys := wire.DefaultKeys(lostASR)
	f.attempt(t, lostASR, message(t, wire.StepExtractAudio, lostASR,
		wire.ExtractAudio{SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio}), "", "succeeded", 0)
	f.exec(t, `INSERT INTO step_parts (task_id, step, part, created_at) VALUES ($1, 'asr', '', now() - interval '1 hour')`, lostASR)
	// translate: one part done, one whose retry was lost, one never ran
	// (its message kept in step_parts), one whose segment ids are so many
	// that its name is a hash.
	trans := f.task(t, time.Hour)
	f.succeeded(t, trans, wire.StepExtractAudio, wire.StepASR)
	tr := func(ids ...string) *wire.Envelope {
		return message(t, wire.StepTranslate, trans, wire.Translate{TaskID: trans, SegmentIDs: ids,
			SourceLanguage: "en", TargetLanguage: "es"})
	}
	var long []string
	for i := 10; i < 70; i++ {
		long = append(long, wire.SegmentID(i))
	}
	hashed := tr(long...)
	if part, _ := step.PartOf(hashed); !strings.Contains(part, "#") {
		t.Fatalf("part %q is not a hashed name", part)
	}
	for _, m := range []*wire.Envelope{tr("seg-0"), tr("seg-1"), tr("seg-2", "seg-3"), hashed} {
		f.emit(t, m, time.Hour)
	}
	f.attempt(t, trans, tr("seg-0"), "seg-0", "succeeded", 0)
	f.attempt(t, trans, tr("seg-1"), "seg-1", "failed", 0)
	// Parked: left to tts_requeue. Fresh: left alone.
	parked := f.task(t, time.Hour)
	f.succeeded(t, parked, wire.StepExtractAudio, wire.StepASR, wire.StepTranslate)
	f.attempt(t, parked, message(t, wire.StepTTS, parked, wire.TTS{TaskID: parked}), "", "parked", 0)
	fresh := f.task(t, time.Second)
	f.succeeded(t, fresh, wire.StepExtractAudio)
	f.emit(t, asrOf(t, fresh), time.Second)
	// Dead-lettered: left to the operator's dubctl dlq replay.
	dead := f.task(t, time.Hour)
	f.succeeded(t, dead, wire.StepExtractAudio)
	deadKeys := wire.DefaultKeys(dead)
	f.attempt(t, dead, message(t, wire.StepASR, dead, wire.ASR{AudioKey: deadKeys.SourceAudio, Language: "en",
		OutputKey: deadKeys.ASR}), "", "failed", 0)
	f.exec(t, `INSERT INTO dead_letters (message_id, task_id, step, attempt) VALUES ('x', $1, 'asr', 1)`, dead)

	// Several replicas at once, pass after pass, re-drive each thing once.
	recs := []*reconciler{f.reconciler(), f.reconciler(), f.reconciler(), f.reconciler()}
	var acts []Action
	for round := 0; round < 40 && count(acts, actionStuck) < 4; round++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, rec := range recs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := rec.runOnce(ctx)
				if err != nil {
					t.Errorf("pass: %v", err)
				}
				mu.Lock()
				acts = append(acts, a...)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	acts = append(acts, passes(t, recs[0], 2)...)
	if n := count(acts, actionStuck); n != 4 {
		t.Errorf("%d re-drives, want 4 (asr, translate seg-1, seg-2,seg-3 and the hashed part): %+v", n, acts)
	}
	if n := count(acts, actionUnrecoverable); n != 0 {
		t.Errorf("%d parts could not be re-driven: %+v", n, acts)
	}
	asr := f.drain(t, wire.QueueASR)
	if len(asr) != 1 || asr[0].TaskID != lostASR || asr[0].Attempt != 2 {
		t.Errorf("task.asr holds %+v", asr)
	} else {
		var p wire.ASR
		if err := asr[0].UnmarshalPayload(&p); err != nil || p.AudioKey != keys.SourceAudio || p.OutputKey != keys.ASR {
			t.Errorf("rebuilt asr payload %+v (%v)", p, err)
		}
	}
	parts := map[string]int{}
	for _, m := range f.drain(t, wire.QueueTranslate) {
		var p wire.Translate
		if err := m.UnmarshalPayload(&p); err != nil {
			t.Fatal(err)
		}
		parts[strings.Join(p.SegmentIDs, ",")] = m.Attempt
	}
	if len(parts) != 3 || parts["seg-1"] != 2 || parts["seg-2,seg-3"] != 2 || parts[strings.Join(long, ",")] != 2 {
		t.Errorf("translate re-drives %v, want seg-1, seg-2,seg-3 and the 60 hashed segments, each as attempt 2", parts)
	}
	if n := len(f.drain(t, wire.QueueTTS)); n != 0 {
		t.Errorf("parked tts re-driven %d times", n)
	}
	// Re-driven parts show activity now: the next passes leave them.
	if again := passes(t, recs[0], 2); count(again, actionStuck)+count(again, actionSuspect) != 0 {
		t.Errorf("passes after the re-drives: %+v", again)
	}
}

// Every non-terminal task has an owner that ends it after
// a bound. A task left compensating past RECONCILE_COMPENSATING_MAX_SECONDS,
// and a running task without progress past RECONCILE_TASK_MAX_IDLE_SECONDS,
// end failed with the reason, and their event.task.failed leaves through
// the outbox (committed with the failure: a broker outage delays it, never
// loses it).
func TestOverdueTasksEndFailedWithAReason(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if _, err := f.ch.QueueDeclare("events", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.ch.QueueBind("events", "event.task.failed", wire.Exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	compensating := f.task(t, 4*24*time.Hour)
	f.exec(t, `UPDATE tasks SET status = 'compensating', error = 'tts: 2 segments failed after 3 retries' WHERE id = $1`, compensating)
	f.succeeded(t, compensating, wire.StepExtractAudio, wire.StepASR, wire.StepTranslate)
	f.attempt(t, compensating, message(t, wire.StepTTS, compensating, wire.TTS{TaskID: compensating}), "", "parked", 0)
	stalled := f.task(t, 2*24*time.Hour)
	f.succeeded(t, stalled, wire.StepExtractAudio)
	// Still moving: compensating since yesterday; a long step holding a live lease.
	recent := f.task(t, 24*time.Hour)
	f.exec(t, `UPDATE tasks SET status = 'compensating' WHERE id = $1`, recent)
	busy := f.task(t, 2*24*time.Hour)
	f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, lease_until) VALUES ($1, 'extract_audio', 1, 'running', now() + interval '1 minute')`, busy)

	rec := f.reconciler()
	rec.pub = failing{}
	acts, err := rec.overdueTasks(ctx)
	if err == nil {
		t.Fatal("publishing through a broken publisher did not fail")
	}
	if n := count(acts, actionFailed); n != 2 {
		t.Fatalf("%d tasks ended, want 2: %+v", n, acts)
	}
	for id, want := range map[uuid.UUID]string{compensating: "compensating", stalled: "no progress"} {
		var status, errText string
		if err := f.pool.QueryRow(ctx, `SELECT status, error FROM tasks WHERE id = $1`, id).Scan(&status, &errText); err != nil {
			t.Fatal(err)
		}
		if status != "failed" || !strings.Contains(errText, want) {
			t.Errorf("task %s is %s with %q, want failed saying %q", id, status, errText, want)
		}
	}
	var inOutbox int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE routing_key = 'event.task.failed'`).Scan(&inOutbox); err != nil || inOutbox != 2 {
		t.Fatalf("%d event.task.failed rows in the outbox (%v), want 2", inOutbox, err)
	}
	for _, id := range []uuid.UUID{recent, busy} {
		var status string
		if err := f.pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&status); err != nil || status == "failed" {
			t.Errorf("task %s still moving is %s (%v)", id, status, err)
		}
	}

	// The outbox check publishes them once the broker is back.
	rec = f.reconciler()
	rec.set.OutboxAge = 0
	passes(t, rec, 1)
	events := map[uuid.UUID]wire.Event{}
	testenv.Eventually(t, "both event.task.failed", func() bool {
		d, ok, err := f.ch.Get("events", true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			var ev wire.Event
			if err := json.Unmarshal(d.Body, &ev); err != nil {
				t.Fatal(err)
			}
			events[ev.TaskID] = ev
		}
		return len(events) == 2
	})
	if ev := events[compensating]; ev.Status != "failed" || ev.Step != wire.StepTTS || !strings.Contains(ev.Error, "tts_requeue") {
		t.Errorf("event of the compensating task %+v", ev)
	}
	if ev := events[stalled]; ev.Status != "failed" || ev.Step != wire.StepASR || !strings.Contains(ev.Error, "no progress") {
		t.Errorf("event of the stalled task %+v", ev)
	}
	if again, err := rec.overdueTasks(ctx); err != nil || len(again) != 0 {
		t.Errorf("second check: %+v, %v", again, err)
	}

	// Three days later (the clock moved): the task compensating since
	// yesterday is past RECONCILE_COMPENSATING_MAX_SECONDS, and the busy
	// task's lease ran out long ago; both end.
	at(t, f, rec, 72*time.Hour)
	later, err := rec.overdueTasks(ctx)
	if err != nil || count(later, actionFailed) != 2 {
		t.Fatalf("three days later: %+v, %v, want the two tasks still moving today ended", later, err)
	}
	for _, id := range []uuid.UUID{recent, busy} {
		var status string
		if err := f.pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&status); err != nil || status != "failed" {
			t.Errorf("task %s three days later is %s (%v), want failed", id, status, err)
		}
	}
}

// failing is a publisher whose broker is down.
type failing struct{}

func (failing) Publish(context.Context, string, string, amqp.Publishing) error {
	return errors.New("broker down")
}

// TestPassesAreCountedInTheMetrics: a pass's actions are counted by kind
// and step, and a re-drive by its cause. The lost extract_audio of a task
// queued a moment ago is idle once the clock moved an hour on: suspected at
// the first pass, re-driven at the second.
func TestPassesAreCountedInTheMetrics(t *testing.T) {
	t.Parallel()
	f := setup(t)
	task := f.task(t, 0) // queued work lost: extract_audio never ran
	f.exec(t, `UPDATE tasks SET status = 'queued' WHERE id = $1`, task)
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	rec := f.reconciler()
	rec.set.StuckTask = time.Minute
	if acts := passes(t, rec, 1); len(acts) != 0 {
		t.Fatalf("a pass before the clock moved: %+v, want nothing (the task is a moment old)", acts)
	}
	at(t, f, rec, time.Hour)
	for range 2 {
		rec.passOnce(context.Background(), m, zerolog.Nop())
	}
	msgs := f.drain(t, wire.QueueExtractAudio)
	if len(msgs) != 1 || msgs[0].TaskID != task {
		t.Fatalf("task.extract_audio holds %+v", msgs)
	}
	rr := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b := rr.Body.String()
	for _, w := range []string{`dubflow_reconciler_redrives_total{cause="lost",step="extract_audio"} 1`,
		`dubflow_reconciler_actions_total{action="task_redriven",step="extract_audio"} 1`,
		`dubflow_reconciler_actions_total{action="suspected_lost",step="extract_audio"} 1`,
		`dubflow_reconciler_passes_total{result="ok"} 2`} {
		if !strings.Contains(b, w) {
			t.Errorf("metrics lack %s:\n%s", w, grep(b, "dubflow_reconciler"))
		}
	}
}

// TestServiceServesMetricsAndReconciles: the service passes once when it
// starts (its next pass is an hour away), serves what the pass did on
// /metrics, and stops cleanly.
func TestServiceServesMetricsAndReconciles(t *testing.T) {
	t.Parallel()
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
			"RECONCILE_INTERVAL_SECONDS": "3600", "STUCK_TASK_SECONDS": "60"}, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	want := []string{`dubflow_reconciler_actions_total{action="suspected_lost",step="extract_audio"} 1`,
		`dubflow_reconciler_passes_total{result="ok"} 1`}
	var b []byte
	testenv.Eventually(t, "the first pass in /metrics", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false // not listening yet
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(string(b), w)
		}
		return ok
	})
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

// TestHeldPartsNothingReleasedAreLetIn: a tts part held in its task's
// window (window 1, another part in flight) whose holder's success never
// released it — an older tts worker during a rolling upgrade records its
// success without release_held — is let in and published once it has
// waited longer than OutboxAge, and not before; a window still full lets
// nothing in.
func TestHeldPartsNothingReleasedAreLetIn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	task := f.task(t, 0)
	first := message(t, wire.StepTTS, task, wire.TTS{TaskID: task, SegmentIDs: []string{"seg-0"}})
	second := message(t, wire.StepTTS, task, wire.TTS{TaskID: task, SegmentIDs: []string{"seg-1"}})
	f.emit(t, first, time.Minute)
	firstPart, _ := step.PartOf(first)
	secondPart, _ := step.PartOf(second)
	body, _ := second.Marshal()
	if err := step.AddPart(ctx, f.pool, task, wire.StepTTS, secondPart, body); err != nil {
		t.Fatal(err)
	}
	var released *int64
	if err := f.pool.QueryRow(ctx, `SELECT hold_part($1, 'tts', $2, 1, $3, $4, 'task.tts', $5)`,
		task, secondPart, uuid.New(), wire.Exchange, body).Scan(&released); err != nil || released != nil {
		t.Fatalf("hold_part: outbox %v, %v; want the part held behind the first", released, err)
	}

	rec := f.reconciler()
	at(t, f, rec, time.Minute)
	if acts := passes(t, rec, 1); count(acts, actionReleased) != 0 {
		t.Fatalf("released %+v while the first part is in flight", acts)
	}
	f.attempt(t, task, first, firstPart, "succeeded", 0)
	fresh := f.reconciler()
	if acts := passes(t, fresh, 1); count(acts, actionReleased) != 0 {
		t.Fatalf("released %+v a part held less than OutboxAge", acts)
	}
	if acts := passes(t, rec, 1); count(acts, actionReleased) != 1 {
		t.Fatalf("pass: %+v, want the held part released", acts)
	}
	msgs := f.drain(t, wire.QueueTTS)
	if len(msgs) != 1 || msgs[0].TaskID != task {
		t.Fatalf("task.tts holds %+v, want the held part's message", msgs)
	}
	if p, _ := step.PartOf(msgs[0]); p != secondPart {
		t.Errorf("published part %q, want %q", p, secondPart)
	}
	if acts := passes(t, rec, 1); count(acts, actionReleased) != 0 {
		t.Errorf("released again: %+v", acts)
	}
}

// TestStrandedChildrenAreCancelled: a child that an operator's cancel of
// its parent skipped (its row was held) is cancelled by the next pass with
// the parent's reason; a child of a parent its children ended cancelled,
// and an ended child, are left alone.
func TestStrandedChildrenAreCancelled(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	cancelled, concluded := uuid.New(), uuid.New()
	stranded, retried, ended := uuid.New(), uuid.New(), uuid.New()
	for _, row := range []struct {
		id             uuid.UUID
		status, errTxt string
		parent         *uuid.UUID
	}{
		{cancelled, "cancelled", "cancelled: by an operator in the console", nil},
		{concluded, "cancelled", "languages: es: cancelled: x", nil},
		{stranded, "running", "", &cancelled},
		{ended, "done", "", &cancelled},
		{retried, "running", "", &concluded},
	} {
		if _, err := f.pool.Exec(ctx, `INSERT INTO tasks (id, status, error, parent_task_id, target_language) VALUES ($1, $2, $3, $4, $5)`,
			row.id, row.status, row.errTxt, row.parent, "l"+row.id.String()[:2]); err != nil {
			t.Fatal(err)
		}
	}
	acts := passes(t, f.reconciler(), 1)
	var got []uuid.UUID
	for _, a := range acts {
		if a.Kind == actionCancelled {
			got = append(got, a.TaskID)
		}
	}
	if len(got) != 1 || got[0] != stranded {
		t.Fatalf("cancelled %v, want only the stranded child %s", got, stranded)
	}
	for id, want := range map[uuid.UUID]string{stranded: "cancelled: by an operator in the console", retried: "", ended: ""} {
		var status, errTxt string
		if err := f.pool.QueryRow(ctx, `SELECT status, error FROM tasks WHERE id = $1`, id).Scan(&status, &errTxt); err != nil {
			t.Fatal(err)
		}
		if errTxt != want {
			t.Errorf("task %s is %s (%q), want error %q", id, status, errTxt, want)
		}
	}
}

// TestEveryBoundEndsItsTask runs the state machine's bounds (task.Ways):
// a task left in each status that has not ended, with nothing moving it,
// is not ended before its bound (with the service's defaults) and is
// ended, where the table says, by the first pass after it. A status that
// waits for a person (review) has no bound: every pass, a year later,
// leaves it as it is and reports nothing about it.
func TestEveryBoundEndsItsTask(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	var cfg Config
	if err := config.Load(map[string]string{}, &cfg); err != nil {
		t.Fatal(err)
	}
	set := cfg.Settings()
	bounds := map[string]time.Duration{"RECONCILE_TASK_MAX_IDLE_SECONDS": set.TaskMaxIdle,
		"RECONCILE_COMPENSATING_MAX_SECONDS": set.CompensatingMax}
	for _, w := range task.Ways {
		if task.Ended(w.Status) {
			continue
		}
		if w.Person {
			leftAlone(t, f, w.Status)
			continue
		}
		setting, _, _ := strings.Cut(w.Bound, " ")
		bound, ok := bounds[setting]
		if !ok {
			t.Errorf("%s: bound %q is none of the reconciler's settings %v", w.Status, w.Bound, bounds)
			continue
		}
		id := f.task(t, 0)
		f.exec(t, `UPDATE tasks SET status = $2 WHERE id = $1`, id, w.Status)
		for _, c := range []struct {
			after time.Duration
			want  string
		}{{bound - time.Minute, w.Status}, {bound + time.Minute, w.BoundTo}} {
			rec := f.reconciler()
			rec.set.TaskMaxIdle, rec.set.CompensatingMax = set.TaskMaxIdle, set.CompensatingMax
			at(t, f, rec, c.after)
			if _, err := rec.overdueTasks(ctx); err != nil {
				t.Fatal(err)
			}
			var status string
			if err := f.pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&status); err != nil {
				t.Fatal(err)
			}
			if status != c.want {
				t.Errorf("%s, %s later: %s, want %s (%s)", w.Status, c.after, status, c.want, w.Bound)
			}
		}
	}
}

// leftAlone checks that every pass of the reconciler, a year after a task
// began waiting in status for a person, neither moves it nor acts on it.
func leftAlone(t *testing.T, f *fixture, status string) {
	t.Helper()
	id := f.task(t, 0)
	f.exec(t, `UPDATE tasks SET status = $2, updated_at = now() - interval '1 year' WHERE id = $1`, id, status)
	rec := f.reconciler()
	at(t, f, rec, 365*24*time.Hour)
	for _, a := range passes(t, rec, 2) {
		if a.TaskID == id {
			t.Errorf("%s: the reconciler acted on a task waiting for a person: %+v", status, a)
		}
	}
	var got string
	if err := f.pool.QueryRow(context.Background(), `SELECT status FROM tasks WHERE id = $1`, id).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != status {
		t.Errorf("%s, a year later: %s, want it left alone", status, got)
	}
}
