package step_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// spawningASR stages what the asr worker stages for the whole audio of a
// task of es and ca: the segments, then, instead of its own translate
// batches, a child task per language (task.Spawn) and the child's batches of
// two (step.Message.EmitFor).
func spawningASR(calls *callLog) step.Handler {
	return step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		calls.add(msg)
		env := msg.Envelope
		msg.Exec(`INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text) VALUES
			($1, 0, 0, 900, 'Hello.'), ($1, 1, 1000, 1900, 'Good day.'), ($1, 2, 2000, 2900, 'Goodbye.')
			ON CONFLICT DO NOTHING`, env.TaskID)
		for _, language := range []string{"es", "ca"} {
			msg.Apply(task.Spawn(task.RefOf(env), language))
			child := wire.ChildTaskID(env.TaskID, language)
			for _, ids := range [][]string{{"seg-0", "seg-1"}, {"seg-2"}} {
				if err := msg.EmitFor(child, wire.StepTranslate, wire.Translate{TaskID: child, SegmentIDs: ids,
					SourceLanguage: "en", TargetLanguage: language, BatchSize: 2}); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// TestSpawnedChildrenAndTheirMessagesAreSentOnce runs the asr step of a task
// with two languages whose handler spawns a child task per language with
// its translate batches (as the asr worker does): each child's batches are
// sent, on the parent's trace. A redelivery of the asr message, and a
// replay of it that runs the handler again, spawn no further child and send
// no further message.
func TestSpawnedChildrenAndTheirMessagesAreSentOnce(t *testing.T) {
	t.Parallel()
	h, env := setupParent(t)
	ctx := context.Background()
	parent := env.TaskID
	calls := &callLog{}
	h.run(wire.QueueASR, []step.Route{{Step: wire.StepASR, After: wire.StepExtractAudio, Timeout: time.Minute,
		Handler: spawningASR(calls)}})
	h.publish(env)

	type sent struct {
		task      uuid.UUID
		target    string
		segments  string
		messageID string
	}
	var got []sent
	for range 4 {
		d := h.nextDelivery(wire.QueueTranslate, 30*time.Second)
		next, err := wire.Decode(d.Body)
		if err != nil {
			t.Fatalf("translate message breaks the contract: %v\n%s", err, d.Body)
		}
		var p wire.Translate
		if err := next.UnmarshalPayload(&p); err != nil {
			t.Fatal(err)
		}
		if d.MessageId != next.MessageID.String() || next.TraceID != env.TraceID {
			t.Errorf("translate message id %s / %s, trace %s", d.MessageId, next.MessageID, next.TraceID)
		}
		got = append(got, sent{next.TaskID, p.TargetLanguage, wire.PartByIDs(p.SegmentIDs), d.MessageId})
	}
	sort.Slice(got, func(i, j int) bool { return got[i].target+got[i].segments < got[j].target+got[j].segments })
	es, ca := wire.ChildTaskID(parent, "es"), wire.ChildTaskID(parent, "ca")
	want := []sent{{ca, "ca", "seg-0,seg-1", ""}, {ca, "ca", "seg-2", ""}, {es, "es", "seg-0,seg-1", ""}, {es, "es", "seg-2", ""}}
	for i := range want {
		if got[i].task != want[i].task || got[i].target != want[i].target || got[i].segments != want[i].segments {
			t.Fatalf("translate messages %+v, want %+v", got, want)
		}
	}
	parts := func() map[string]int {
		rows, err := h.db.Pool.Query(ctx, `SELECT task_id::text || '/' || step, count(*) FROM step_parts GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		var k string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { out[k] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := parts()
	if before[parent.String()+"/translate"] != 0 || before[es.String()+"/translate"] != 2 || before[ca.String()+"/translate"] != 2 {
		t.Fatalf("registered parts %v: want two translate parts per child and none of the parent", before)
	}
	f, err := task.FamilyOf(ctx, h.db.Pool, parent)
	if err != nil || len(f.Children) != 2 {
		t.Fatalf("children %+v, %v", f, err)
	}

	// The same message again is a duplicate the claim skips. To run the
	// handler again all the same, the part's success is taken back (as a
	// restore of an older backup could) and the message replayed.
	h.publish(env)
	testenv.EventuallyWithin(t, 30*time.Second, "the duplicate to be skipped", func() bool { return h.ready(wire.QueueASR) == 0 })
	if _, err := h.db.Pool.Exec(ctx, `UPDATE task_steps SET status = 'failed' WHERE task_id = $1 AND step = 'asr'`,
		parent); err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, h.db.Pool, func(tx pgx.Tx) error {
		_, _, err := step.Replay(ctx, tx, env, "test")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 30*time.Second, "the replay's attempt to succeed", func() bool {
		var n int
		_ = h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'asr' AND attempt = 2
			AND status = 'succeeded'`, parent).Scan(&n)
		return n == 1
	})
	testenv.EventuallyWithin(t, 30*time.Second, "the outbox to empty", func() bool { return h.outboxRows() == 0 })
	if n := calls.len(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (the first delivery and the replay)", n)
	}
	if after := parts(); len(after) != len(before) || after[es.String()+"/translate"] != 2 || after[ca.String()+"/translate"] != 2 {
		t.Errorf("parts after the replay %v, before %v", after, before)
	}
	if n := h.ready(wire.QueueTranslate); n != 0 {
		t.Errorf("%d more translate messages after the redelivery and the replay, want 0", n)
	}
	var children int
	if err := h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE parent_task_id = $1`, parent).Scan(&children); err != nil || children != 2 {
		t.Errorf("children after the replay: %d (%v), want 2", children, err)
	}
	// The parent's own record: extract_audio and asr, nothing more.
	var steps []string
	rows, err := h.db.Pool.Query(ctx, `SELECT DISTINCT step FROM task_steps WHERE task_id = $1 ORDER BY step`, parent)
	if err != nil {
		t.Fatal(err)
	}
	if steps, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(steps) != 2 {
		t.Errorf("parent steps %v (%v), want asr and extract_audio", steps, err)
	}
	raw, _ := json.Marshal(f)
	t.Logf("family: %s", raw)
}

// setupParent is a harness holding a parent task of es and ca whose
// extract_audio succeeded; env is the parent's asr message.
func setupParent(t *testing.T) (*harness, *wire.Envelope) {
	t.Helper()
	h := setup(t)
	env := asrEnvelope(t)
	ctx := context.Background()
	if _, err := task.Apply(ctx, h.db.Pool, task.Create(task.Details{ID: env.TaskID, SourceLanguage: "en",
		TargetLanguage: "es", TraceID: env.TraceID, Targets: []string{"es", "ca"}})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'extract_audio', 1, 'succeeded', now())`, env.TaskID); err != nil {
		t.Fatal(err)
	}
	return h, env
}
