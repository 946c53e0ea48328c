package task_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// row is a task row as the tests read it back.
type row struct {
	status, err, outputKey, result string
	updated                        time.Time
}

func read(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) row {
	t.Helper()
	var r row
	err := pool.QueryRow(context.Background(), `SELECT status, error, output_video_key, result::text, updated_at
		FROM tasks WHERE id = $1`, id).Scan(&r.status, &r.err, &r.outputKey, &r.result, &r.updated)
	if err != nil {
		t.Fatalf("read task %s: %v", id, err)
	}
	return r
}

// apply applies the transitions in order, failing the test at the first
// error.
func apply(t *testing.T, ctx context.Context, q task.Querier, trs ...task.Transition) {
	t.Helper()
	for _, tr := range trs {
		if _, err := task.Apply(ctx, q, tr); err != nil {
			t.Fatalf("%s: %v", tr.Name, err)
		}
	}
}

// seed inserts a task in status with an old updated_at, a trace and an
// error, so that every change of the row shows.
func seed(t *testing.T, pool *pgxpool.Pool, status string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if _, err := pool.Exec(context.Background(), `INSERT INTO tasks (id, status, error, trace_id, output_video_key, updated_at)
		VALUES ($1, $2, $3, 'trace-row', $4, now() - interval '1 hour')`,
		id, status, "earlier: "+status, wire.DefaultKeys(id).OutputVideo); err != nil {
		t.Fatal(err)
	}
	return id
}

// events returns the events in the outbox for task id, decoded and checked
// against the wire schema.
func events(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) []*wire.Event {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT message_id, routing_key, body FROM outbox
		WHERE routing_key LIKE 'event.%' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type msg struct {
		id   uuid.UUID
		key  string
		body []byte
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (msg, error) {
		var m msg
		return m, r.Scan(&m.id, &m.key, &m.body)
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*wire.Event
	for _, m := range msgs {
		e, err := wire.DecodeEvent(m.body)
		if err != nil {
			t.Fatalf("event %s breaks the wire contract: %v\n%s", m.key, err, m.body)
		}
		if m.key != e.RoutingKey() {
			t.Fatalf("event %s published under %s", e.Event, m.key)
		}
		if e.EventID == uuid.Nil || e.EventID != m.id {
			t.Fatalf("event %s has event_id %s, published as message %s; want one stable id", e.Event, e.EventID, m.id)
		}
		if e.TaskID == id {
			out = append(out, e)
		}
	}
	return out
}

const missing = "missing"

// TestEveryTransitionFromEveryStatus applies each transition to a task in
// each status (and to no task) and checks the status it leaves the row in,
// the event it announces, and that what it must refuse it refuses without
// writing anything.
func TestEveryTransitionFromEveryStatus(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	type want struct {
		to    string // status after; "" when refused or not found
		event string // "" for none
		kept  bool   // the row is not written
	}
	moved := func(to, event string) want { return want{to: to, event: event} }
	refreshed := func(to string) want { return want{to: to} }
	kept := func(s string) want { return want{to: s, kept: true} }
	refused := want{}
	transitions := []struct {
		name  string
		build func(id uuid.UUID) task.Transition
		from  map[string]want
	}{
		{"start", func(id uuid.UUID) task.Transition { return task.Start(task.Ref{ID: id, Step: "extract_audio"}) },
			map[string]want{task.Queued: moved(task.Running, wire.EventTaskStarted), task.Running: refreshed(task.Running),
				task.Compensating: kept(task.Compensating), task.Review: kept(task.Review), task.Done: kept(task.Done),
				task.Failed: kept(task.Failed), task.Cancelled: kept(task.Cancelled)}},
		{"touch", func(id uuid.UUID) task.Transition { return task.Touch(id) },
			map[string]want{task.Queued: refreshed(task.Queued), task.Running: refreshed(task.Running),
				task.Compensating: refreshed(task.Compensating), task.Review: refused, task.Done: refused, task.Failed: refused,
				task.Cancelled: refused}},
		{"compensate", func(id uuid.UUID) task.Transition {
			return task.Compensate(task.Ref{ID: id, Step: "tts"}, "tts: 2 segments failed")
		}, map[string]want{task.Queued: refused, task.Running: moved(task.Compensating, wire.EventTaskCompensating),
			task.Compensating: refreshed(task.Compensating), task.Review: refused, task.Done: refused, task.Failed: refused,
			task.Cancelled: refused}},
		{"resume", func(id uuid.UUID) task.Transition { return task.Resume(task.Ref{ID: id, Step: "tts"}) },
			map[string]want{task.Queued: refused, task.Running: refreshed(task.Running),
				task.Compensating: moved(task.Running, wire.EventTaskResumed), task.Review: refused, task.Done: refused,
				task.Failed: refused, task.Cancelled: refused}},
		{"succeed", func(id uuid.UUID) task.Transition {
			return task.Succeed(task.Ref{ID: id, Step: "mux_video"}, json.RawMessage(`{"segments":3}`), "")
		}, map[string]want{task.Queued: refused, task.Running: moved(task.Done, wire.EventTaskSucceeded),
			task.Compensating: refused, task.Review: refused, task.Done: refused, task.Failed: refused, task.Cancelled: refused}},
		{"fail", func(id uuid.UUID) task.Transition {
			return task.Fail(task.Ref{ID: id, Step: "asr"}, "", "engine unreachable")
		}, map[string]want{task.Queued: moved(task.Failed, wire.EventTaskFailed), task.Running: moved(task.Failed, wire.EventTaskFailed),
			task.Compensating: moved(task.Failed, wire.EventTaskFailed), task.Review: moved(task.Failed, wire.EventTaskFailed),
			task.Done: kept(task.Done), task.Failed: refreshed(task.Failed), task.Cancelled: kept(task.Cancelled)}},
		{"cancel", func(id uuid.UUID) task.Transition { return task.Cancel(task.Ref{ID: id}, "operator") },
			map[string]want{task.Queued: moved(task.Cancelled, wire.EventTaskCancelled), task.Running: moved(task.Cancelled, wire.EventTaskCancelled),
				task.Compensating: moved(task.Cancelled, wire.EventTaskCancelled),
				task.Review:       moved(task.Cancelled, wire.EventTaskCancelled), task.Done: refused, task.Failed: refused,
				task.Cancelled: refused}},
		{"retry", func(id uuid.UUID) task.Transition { return task.Retry(task.Ref{ID: id, Step: "asr"}) },
			map[string]want{task.Queued: moved(task.Running, wire.EventTaskRetried), task.Running: kept(task.Running),
				task.Compensating: kept(task.Compensating), task.Review: refused, task.Done: refused,
				task.Failed:    moved(task.Running, wire.EventTaskRetried),
				task.Cancelled: moved(task.Running, wire.EventTaskRetried)}},
		{"redub", func(id uuid.UUID) task.Transition { return task.Redub(task.Ref{ID: id}) },
			map[string]want{task.Queued: refused, task.Running: refused, task.Compensating: refused, task.Review: refused,
				task.Done: moved(task.Running, wire.EventTaskRedubbing), task.Failed: refused, task.Cancelled: refused}},
		{"hold", func(id uuid.UUID) task.Transition {
			return task.Hold(task.Ref{ID: id, Step: "asr"}, task.StageTranscript)
		}, map[string]want{task.Queued: moved(task.Review, wire.EventTaskReview), task.Running: moved(task.Review, wire.EventTaskReview),
			task.Compensating: kept(task.Compensating), task.Review: refreshed(task.Review), task.Done: kept(task.Done),
			task.Failed: kept(task.Failed), task.Cancelled: kept(task.Cancelled)}},
		{"approve", func(id uuid.UUID) task.Transition { return task.Approve(task.Ref{ID: id}, task.StageTranscript) },
			map[string]want{task.Queued: refused, task.Running: refused, task.Compensating: refused,
				task.Review: moved(task.Running, wire.EventTaskApproved), task.Done: refused, task.Failed: refused,
				task.Cancelled: refused}},
	}
	statuses := append(append([]string{}, task.Statuses...), missing)
	for _, tr := range transitions {
		for _, from := range statuses {
			t.Run(tr.name+"/"+from, func(t *testing.T) {
				var id uuid.UUID
				var before row
				if from == missing {
					id = uuid.New()
				} else {
					id = seed(t, db.Pool, from)
					before = read(t, db.Pool, id)
				}
				res, err := task.Apply(ctx, db.Pool, tr.build(id))
				if from == missing {
					if !errors.Is(err, task.ErrNotFound) {
						t.Fatalf("%s of a missing task: %+v, %v; want ErrNotFound", tr.name, res, err)
					}
					return
				}
				w, ok := tr.from[from]
				if !ok {
					t.Fatalf("test table lacks %s from %s", tr.name, from)
				}
				after := read(t, db.Pool, id)
				evs := events(t, db.Pool, id)
				if w.to == "" {
					var re *task.RefusedError
					if !errors.As(err, &re) || !errors.Is(err, task.ErrRefused) {
						t.Fatalf("%s from %s = %+v, %v; want a refusal", tr.name, from, res, err)
					}
					if re.TaskID != id || re.From != from || re.Transition != tr.name {
						t.Errorf("refusal names task %s, status %q, transition %q; want %s, %q, %q",
							re.TaskID, re.From, re.Transition, id, from, tr.name)
					}
					if !strings.Contains(err.Error(), from) || !strings.Contains(err.Error(), tr.name) {
						t.Errorf("refusal %q does not say what was refused from what", err)
					}
					if after != before || len(evs) != 0 {
						t.Fatalf("a refused %s wrote the row (%+v → %+v) or announced %d events", tr.name, before, after, len(evs))
					}
					return
				}
				if err != nil {
					t.Fatalf("%s from %s: %v", tr.name, from, err)
				}
				if res.From != from || res.To != w.to || res.Changed == w.kept || after.status != w.to {
					t.Fatalf("%s from %s = %+v, row %s; want to %s, changed %v", tr.name, from, res, after.status, w.to, !w.kept)
				}
				if w.kept && after != before {
					t.Fatalf("a kept task's row was written: %+v → %+v", before, after)
				}
				if !w.kept && !after.updated.After(before.updated) {
					t.Errorf("updated_at did not move")
				}
				if w.event == "" {
					if len(evs) != 0 || res.EventID != 0 {
						t.Fatalf("%s from %s announced %d events (event id %d); want none", tr.name, from, len(evs), res.EventID)
					}
					return
				}
				if len(evs) != 1 || res.EventID == 0 {
					t.Fatalf("%s from %s announced %d events (event id %d); want one %s", tr.name, from, len(evs), res.EventID, w.event)
				}
				e := evs[0]
				if e.Event != w.event || e.Status != w.to || e.TraceID != "trace-row" {
					t.Errorf("event %s status %s trace %q; want %s %s with the row's trace", e.Event, e.Status, e.TraceID, w.event, w.to)
				}
			})
		}
	}
}

func TestTransitionsWriteWhatTheyAnnounce(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()

	t.Run("succeed records the result and output key", func(t *testing.T) {
		id := seed(t, db.Pool, task.Running)
		key := wire.DefaultKeys(id).OutputVideo
		res, err := task.Apply(ctx, db.Pool, task.Succeed(task.Ref{ID: id, Step: "mux_video", Trace: "trace-msg"},
			json.RawMessage(`{"segments":3,"output_video_key":"`+key+`"}`), key))
		if err != nil {
			t.Fatal(err)
		}
		r := read(t, db.Pool, id)
		if r.err != "" || r.outputKey != key || !strings.Contains(r.result, `"segments": 3`) {
			t.Fatalf("row after succeed: %+v", r)
		}
		e := events(t, db.Pool, id)[0]
		if e.OutputVideoKey != key || e.Step != "mux_video" || e.TraceID != "trace-msg" || !strings.Contains(string(e.Data), `"segments":3`) {
			t.Fatalf("event after succeed: %+v", e)
		}
		if res.EventID == 0 {
			t.Fatal("no event id")
		}
	})

	t.Run("succeed without an output key keeps the task's", func(t *testing.T) {
		id := seed(t, db.Pool, task.Running)
		apply(t, ctx, db.Pool, task.Succeed(task.Ref{ID: id, Step: "asr"}, json.RawMessage(`{"no_speech":true}`), ""))
		if r := read(t, db.Pool, id); r.outputKey != "outputs/"+id.String()+"/final.mp4" || r.result != `{"no_speech": true}` {
			t.Fatalf("row after succeed: %+v", r)
		}
	})

	t.Run("fail records its reason and keeps the first error", func(t *testing.T) {
		id := seed(t, db.Pool, task.Running)
		apply(t, ctx, db.Pool, task.Fail(task.Ref{ID: id, Step: "asr"}, "", "asr: engine said \x00no\xff"))
		if r := read(t, db.Pool, id); r.err != "asr: engine said \uFFFDno\uFFFD" {
			t.Fatalf("error after fail = %q", r.err)
		}
		apply(t, ctx, db.Pool, task.Fail(task.Ref{ID: id, Step: "tts"}, "", "tts: later"))
		if r := read(t, db.Pool, id); r.err != "asr: engine said \uFFFDno\uFFFD" {
			t.Fatalf("a second failure replaced the first error: %q", r.err)
		}
		evs := events(t, db.Pool, id)
		if len(evs) != 1 || evs[0].Error != "asr: engine said \uFFFDno\uFFFD" || evs[0].Step != "asr" {
			t.Fatalf("events: %+v; want one task.failed naming asr", evs)
		}
	})

	t.Run("fail keeps a task whose failing part succeeded since", func(t *testing.T) {
		id := seed(t, db.Pool, task.Running)
		if _, err := db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status)
			VALUES ($1, 'translate', 'seg-0,seg-1', 2, 'succeeded')`, id); err != nil {
			t.Fatal(err)
		}
		res, err := task.Apply(ctx, db.Pool, task.Fail(task.Ref{ID: id, Step: "translate"}, "seg-0,seg-1", "stale dead letter"))
		if err != nil || res.Changed || read(t, db.Pool, id).status != task.Running {
			t.Fatalf("fail for a part that succeeded: %+v, %v", res, err)
		}
		// Another part's failure still fails the task.
		res, err = task.Apply(ctx, db.Pool, task.Fail(task.Ref{ID: id, Step: "translate"}, "seg-2", "bad batch"))
		if err != nil || !res.Changed || res.To != task.Failed {
			t.Fatalf("fail for a part that did not succeed: %+v, %v", res, err)
		}
	})

	t.Run("an event error is cut to the wire's bound", func(t *testing.T) {
		id := seed(t, db.Pool, task.Running)
		long := strings.Repeat("é", 5000)
		apply(t, ctx, db.Pool, task.Fail(task.Ref{ID: id, Step: "asr"}, "", "asr: "+long))
		if r := read(t, db.Pool, id); r.err != "asr: "+long {
			t.Fatalf("the task's error was cut: %d bytes", len(r.err))
		}
		if e := events(t, db.Pool, id)[0]; len(e.Error) > 4096 {
			t.Fatalf("event error %d bytes", len(e.Error))
		}
	})

	t.Run("cancel and compensate record their reason", func(t *testing.T) {
		id := seed(t, db.Pool, task.Running)
		apply(t, ctx, db.Pool, task.Compensate(task.Ref{ID: id, Step: "tts"}, "tts: 1 segment failed"))
		if r := read(t, db.Pool, id); r.err != "tts: 1 segment failed" {
			t.Fatalf("error after compensate = %q", r.err)
		}
		apply(t, ctx, db.Pool, task.Cancel(task.Ref{ID: id}, "operator asked"))
		r := read(t, db.Pool, id)
		evs := events(t, db.Pool, id)
		if r.status != task.Cancelled || r.err != "cancelled: operator asked" || len(evs) != 2 || evs[1].Error != r.err ||
			evs[1].Event != wire.EventTaskCancelled || evs[1].Status != task.Cancelled {
			t.Fatalf("after cancel: row %+v, events %+v", r, evs)
		}
	})

	t.Run("resume, retry and redub clear the error", func(t *testing.T) {
		for from, tr := range map[string]func(uuid.UUID) task.Transition{
			task.Compensating: func(id uuid.UUID) task.Transition { return task.Resume(task.Ref{ID: id}) },
			task.Failed:       func(id uuid.UUID) task.Transition { return task.Retry(task.Ref{ID: id}) },
			task.Cancelled:    func(id uuid.UUID) task.Transition { return task.Retry(task.Ref{ID: id}) },
			task.Done:         func(id uuid.UUID) task.Transition { return task.Redub(task.Ref{ID: id}) },
		} {
			id := seed(t, db.Pool, from)
			apply(t, ctx, db.Pool, tr(id))
			if r := read(t, db.Pool, id); r.status != task.Running || r.err != "" {
				t.Errorf("from %s: row %+v", from, r)
			}
		}
	})
}

func TestCreateAndSettle(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	id := uuid.New()
	d := task.Details{ID: id, SourceLanguage: "en", TargetLanguage: "es", SpeakerID: "alice",
		SourceVideoKey: wire.DefaultKeys(id).SourceVideo, OutputVideoKey: wire.DefaultKeys(id).OutputVideo, TraceID: "trace-1"}
	res, err := task.Apply(ctx, db.Pool, task.Create(d))
	if err != nil || !res.Changed || res.From != "" || res.To != task.Queued || res.EventID == 0 {
		t.Fatalf("create: %+v, %v", res, err)
	}
	evs := events(t, db.Pool, id)
	if len(evs) != 1 || evs[0].Event != wire.EventTaskQueued || evs[0].TraceID != "trace-1" {
		t.Fatalf("events after create: %+v", evs)
	}
	// Creating it again (a redelivered first message) keeps the row.
	again := d
	again.SpeakerID = "bob"
	res, err = task.Apply(ctx, db.Pool, task.Create(again))
	if err != nil || res.Changed || res.From != task.Queued {
		t.Fatalf("second create: %+v, %v", res, err)
	}
	if n := len(events(t, db.Pool, id)); n != 1 {
		t.Fatalf("a second create announced again: %d events", n)
	}
	// Settle records what the first step settled; the status and the
	// trace stay.
	apply(t, ctx, db.Pool, task.Start(task.Ref{ID: id}))
	settled := again
	settled.TraceID = "trace-2"
	res, err = task.Apply(ctx, db.Pool, task.Settle(settled))
	if err != nil || res.To != task.Running {
		t.Fatalf("settle: %+v, %v", res, err)
	}
	var speaker, trace, status string
	if err := db.Pool.QueryRow(ctx, `SELECT speaker_id, trace_id, status FROM tasks WHERE id = $1`, id).Scan(&speaker, &trace, &status); err != nil {
		t.Fatal(err)
	}
	if speaker != "bob" || trace != "trace-1" || status != task.Running {
		t.Fatalf("after settle: speaker %s trace %s status %s", speaker, trace, status)
	}
	// Settle of a task without a row (a message published straight to
	// the exchange) makes it.
	other := uuid.New()
	d.ID = other
	if res, err := task.Apply(ctx, db.Pool, task.Settle(d)); err != nil || res.To != task.Queued {
		t.Fatalf("settle of a new task: %+v, %v", res, err)
	}
}

// TestARefusedTransitionRollsBackItsBatch runs a transition the way the step
// runtime commits a step: staged in one batch (an implicit transaction) with
// the step's other statements. A refusal must undo them all.
func TestARefusedTransitionRollsBackItsBatch(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	id := seed(t, db.Pool, task.Failed) // cancelled, say, while mux ran
	tr := task.Succeed(task.Ref{ID: id, Step: "mux_video", Trace: "t"}, json.RawMessage(`{}`), "")
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO task_steps (task_id, step, attempt, status) VALUES ($1, 'mux_video', 1, 'succeeded')`, id)
	batch.Queue(tr.SQL, tr.Args...)
	br := db.Pool.SendBatch(ctx, batch)
	_, err1 := br.Exec()
	_, err2 := tr.Scan(br.QueryRow())
	_ = br.Close() // repeats the refusal
	if err1 != nil {
		t.Fatal(err1)
	}
	if !errors.Is(err2, task.ErrRefused) {
		t.Fatalf("succeed of a failed task in a batch: %v; want a refusal", err2)
	}
	var steps int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1`, id).Scan(&steps); err != nil {
		t.Fatal(err)
	}
	if steps != 0 || read(t, db.Pool, id).status != task.Failed || len(events(t, db.Pool, id)) != 0 {
		t.Fatalf("the refused batch left %d step rows, status %s", steps, read(t, db.Pool, id).status)
	}
	if tr.Event.ID != 0 {
		t.Fatalf("a refused transition's event got outbox id %d", tr.Event.ID)
	}
}

// TestConcurrentTransitionsApplyOnce races the same transition from many
// transactions: the row lock serializes them, one moves the task and
// announces it, the others find it moved.
func TestConcurrentTransitionsApplyOnce(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	id := seed(t, db.Pool, task.Running)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				_, err := task.Apply(ctx, tx, task.Succeed(task.Ref{ID: id, Step: "mux_video"},
					json.RawMessage(fmt.Sprintf(`{"run":%d}`, i)), ""))
				return err
			})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, task.ErrRefused):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 1 || len(events(t, db.Pool, id)) != 1 {
		t.Fatalf("%d of %d concurrent succeeds applied, %d events; want exactly one", ok, n, len(events(t, db.Pool, id)))
	}
}

func TestMapErrorLeavesOtherErrorsAlone(t *testing.T) {
	t.Parallel()
	for _, err := range []error{nil, errors.New("connection reset"), pgx.ErrNoRows} {
		if got := task.MapError(err); got != err {
			t.Errorf("MapError(%v) = %v", err, got)
		}
	}
}

// TestSettleRecordsTheProject: the first step records the task's project,
// and a later Settle without one keeps it.
func TestSettleRecordsTheProject(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	id := uuid.New()
	project := func() string {
		var p string
		if err := db.Pool.QueryRow(ctx, `SELECT project FROM tasks WHERE id = $1`, id).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	d := task.Details{ID: id, SourceLanguage: "en", TargetLanguage: "es", Project: "studio"}
	apply(t, ctx, db.Pool, task.Settle(d))
	if got := project(); got != "studio" {
		t.Fatalf("project %q after Settle, want studio", got)
	}
	d.Project = ""
	apply(t, ctx, db.Pool, task.Settle(d))
	if got := project(); got != "studio" {
		t.Fatalf("project %q after a Settle without one, want it kept", got)
	}
}
