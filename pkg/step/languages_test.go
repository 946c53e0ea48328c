package step_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// fakeASR stages what the asr worker stages for the whole audio: the
// segments, one translate message per batch of two, and nothing else.
func fakeASR(calls *callLog) step.Handler {
	return step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		calls.add(msg)
		env := msg.Envelope
		msg.Exec(`INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text) VALUES
			($1, 0, 0, 900, 'Hello.'), ($1, 1, 1000, 1900, 'Good day.'), ($1, 2, 2000, 2900, 'Goodbye.')
			ON CONFLICT DO NOTHING`, env.TaskID)
		for _, ids := range [][]string{{"seg-0", "seg-1"}, {"seg-2"}} {
			if err := msg.Emit(wire.StepTranslate, wire.Translate{TaskID: env.TaskID, SegmentIDs: ids,
				SourceLanguage: "en", TargetLanguage: "es", BatchSize: 2}); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestAParentTaskTranscribesOnceAndFansOutPerLanguage runs the asr step of
// a task with two languages: the task's own translate messages are not
// sent; instead one child task per language is spawned with its translate
// batches. A redelivery of the asr message, and a replay of it that runs
// the handler again, spawn no further child and send no further message.
func TestAParentTaskTranscribesOnceAndFansOutPerLanguage(t *testing.T) {
	t.Parallel()
	h, env := setupParent(t)
	ctx := context.Background()
	parent := env.TaskID
	// Only the parent's video is in storage; the fan-out places each
	// child's.
	objects := videoStore(t, parent)
	calls := h.runFanOut(env, objects)

	type sent struct {
		task      uuid.UUID
		target    string
		segments  string
		messageID string
	}
	var got []sent
	for range 4 {
		d := h.nextDelivery(broker.QueueTranslate, 30*time.Second)
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
	checkChildVideos(t, objects, parent, "es", "ca")

	// The same message again is a duplicate the claim skips. To run the
	// handler again all the same, the part's success is taken back (as a
	// restore of an older backup could) and the message replayed.
	h.publish(env)
	waitFor(t, 30*time.Second, "the duplicate to be skipped", func() bool { return h.ready(broker.QueueASR) == 0 })
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
	waitFor(t, 30*time.Second, "the replay's attempt to succeed", func() bool {
		var n int
		_ = h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'asr' AND attempt = 2
			AND status = 'succeeded'`, parent).Scan(&n)
		return n == 1
	})
	waitFor(t, 30*time.Second, "the outbox to empty", func() bool { return h.outboxRows() == 0 })
	if n := calls.len(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (the first delivery and the replay)", n)
	}
	if after := parts(); len(after) != len(before) || after[es.String()+"/translate"] != 2 || after[ca.String()+"/translate"] != 2 {
		t.Errorf("parts after the replay %v, before %v", after, before)
	}
	if n := h.ready(broker.QueueTranslate); n != 0 {
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

// parentVideo is what the tests store as a parent's source video.
var parentVideo = bytes.Repeat([]byte("not quite a video "), 1000)

// videoStore returns a bucket of its own holding the source video of
// parent (none for uuid.Nil).
func videoStore(t *testing.T, parent uuid.UUID) *blob.Store {
	t.Helper()
	b := testenv.S3(t)
	s, err := blob.New(config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Bucket: b.Name, UseSSL: b.UseSSL})
	if err != nil {
		t.Fatal(err)
	}
	if parent != uuid.Nil {
		if err := s.Put(context.Background(), wire.DefaultKeys(parent).SourceVideo, bytes.NewReader(parentVideo),
			int64(len(parentVideo)), "video/mp4"); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func withObjects(c step.Copier) options { return func(cfg *step.Config) { cfg.Objects = c } }

// checkChildVideos: each child's source video is the parent's.
func checkChildVideos(t *testing.T, s *blob.Store, parent uuid.UUID, languages ...string) {
	t.Helper()
	for _, l := range languages {
		key := wire.DefaultKeys(wire.ChildTaskID(parent, l)).SourceVideo
		got, err := s.Get(context.Background(), key, 1<<20)
		if err != nil || !bytes.Equal(got, parentVideo) {
			t.Errorf("video of the %s child at %s: %d bytes (%v), want the parent's %d", l, key, len(got), err, len(parentVideo))
		}
	}
}

// outage is an object store that is down for its first copies.
type outage struct {
	*blob.Store
	down  int32
	calls atomic.Int32
}

func (o *outage) Copy(ctx context.Context, kind string, src, dst blob.Ref) error {
	if o.calls.Add(1) <= o.down {
		return fault.Unavailable(errors.New("object store restarting"))
	}
	return o.Store.Copy(ctx, kind, src, dst)
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

// runFanOut serves asr (after extract_audio) with fakeASR, objects being
// the store the fan-out copies the children's videos in, and publishes
// env; it returns the handler's calls.
func (h *harness) runFanOut(env *wire.Envelope, objects step.Copier) *callLog {
	h.t.Helper()
	calls := &callLog{}
	h.run(broker.QueueASR, []step.Route{{Step: wire.StepASR, After: wire.StepExtractAudio, Timeout: time.Minute,
		Handler: fakeASR(calls)}}, withObjects(objects))
	h.publish(env)
	return calls
}

// TestAnObjectStoreOutageAtTheFanOutSpendsNoRetry: while the object store
// cannot copy the children's videos, the fan-out's step is handed back
// without a failed attempt, and spawns nothing; once the store answers the
// children are spawned with their videos in place, in the step's first
// attempt.
func TestAnObjectStoreOutageAtTheFanOutSpendsNoRetry(t *testing.T) {
	t.Parallel()
	h, env := setupParent(t)
	ctx := context.Background()
	parent := env.TaskID
	objects := &outage{Store: videoStore(t, parent), down: 2}
	calls := h.runFanOut(env, objects)
	for range 4 {
		h.nextDelivery(broker.QueueTranslate, time.Minute)
	}
	var attempts, failed, children int
	if err := h.db.Pool.QueryRow(ctx, `SELECT (SELECT max(attempt) FROM task_steps WHERE task_id = $1 AND step = 'asr'),
		(SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'asr' AND status <> 'succeeded'),
		(SELECT count(*) FROM tasks WHERE parent_task_id = $1)`, parent).Scan(&attempts, &failed, &children); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || failed != 0 || children != 2 {
		t.Errorf("asr attempts %d (%d not succeeded), children %d: want one attempt, no failure, two children",
			attempts, failed, children)
	}
	if n := calls.len(); n != 3 || objects.calls.Load() < 4 {
		t.Errorf("handler ran %d times, %d copies: want 3 runs (two outages, then the success) and ≥ 4 copies",
			n, objects.calls.Load())
	}
	checkChildVideos(t, objects.Store, parent, "es", "ca")
}

// TestAParentWithoutItsVideoFailsAtTheFanOut: a parent whose video is gone
// when its asr completes fails that step for good, without spending
// retries and without spawning a child that could only fail at its mux.
func TestAParentWithoutItsVideoFailsAtTheFanOut(t *testing.T) {
	t.Parallel()
	h, env := setupParent(t)
	ctx := context.Background()
	parent := env.TaskID
	calls := h.runFanOut(env, videoStore(t, uuid.Nil))
	var status string
	waitFor(t, time.Minute, "the parent to fail", func() bool {
		_ = h.db.Pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, parent).Scan(&status)
		return status == task.Failed
	})
	var attempts, children int
	var reason string
	if err := h.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'asr'),
		(SELECT count(*) FROM tasks WHERE parent_task_id = $1), (SELECT coalesce(error, '') FROM tasks WHERE id = $1)`,
		parent).Scan(&attempts, &children, &reason); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || children != 0 || calls.len() != 1 {
		t.Errorf("asr attempts %d, handler runs %d, children %d: want 1, 1, 0", attempts, calls.len(), children)
	}
	t.Logf("parent failed: %s", reason)
}
