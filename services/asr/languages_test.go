package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// parentVideo is what the tests store as a parent's source video: the copy
// to the children's keys does not read it.
var parentVideo = bytes.Repeat([]byte("not quite a video "), 1000)

// newParent is newTask for a task that dubs into es and ca at once, its
// source video stored unless withVideo is false.
func newParent(s *testenv.Stack, wav string, withVideo bool) *wire.Envelope {
	s.T.Helper()
	ctx := context.Background()
	env := newTask(s, wav)
	keys := wire.DefaultKeys(env.TaskID)
	if _, err := s.DB.Pool.Exec(ctx, `UPDATE tasks SET targets = '{es,ca}', source_video_key = $2, trace_id = $3 WHERE id = $1`,
		env.TaskID, keys.SourceVideo, env.TraceID); err != nil {
		s.T.Fatal(err)
	}
	if withVideo {
		if err := s.Blob.Put(ctx, keys.SourceVideo, bytes.NewReader(parentVideo), int64(len(parentVideo)), "video/mp4"); err != nil {
			s.T.Fatal(err)
		}
	}
	return env
}

// TestAParentTranscribesOnceAndSpawnsAChildPerLanguage: the asr step of a
// task of two languages transcribes once, sends no translate batch of its
// own, and spawns a child task per language that starts with the parent's
// segments, its video under the child's key, and its translate batches on
// the parent's trace. A parent whose video is gone fails its asr step for
// good and spawns nothing.
func TestAParentTranscribesOnceAndSpawnsAChildPerLanguage(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, run, map[string]string{"TRANSLATE_BATCH_SIZE": "3"})
	s.Start()
	ctx := context.Background()
	jfk := filepath.Join(fixtures(t), "jfk.wav")

	env := newParent(s, jfk, true)
	parent := env.TaskID
	s.Publish(env)
	if got := s.WaitStep(parent, wire.StepASR, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("asr %s: %+v", got, s.Task(parent))
	}
	checkChildren(t, s, env)

	gone := newParent(s, jfk, false)
	s.Publish(gone)
	if got := s.WaitStep(gone.TaskID, wire.StepASR, "succeeded", "failed"); got != "failed" {
		t.Fatalf("asr of a parent without its video: %s, want failed", got)
	}
	var attempts, children int
	if err := s.DB.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'asr'),
		(SELECT count(*) FROM tasks WHERE parent_task_id = $1)`, gone.TaskID).Scan(&attempts, &children); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || children != 0 {
		t.Errorf("asr attempts %d, children %d: want one attempt (a missing video is permanent) and no child", attempts, children)
	}
}

// TestAChunkedParentSpawnsItsChildrenAtTheMerge: a parent whose audio is cut
// into chunks sends no translate batch while its chunks are transcribed;
// the merge spawns the children, each with every segment of every chunk.
func TestAChunkedParentSpawnsItsChildrenAtTheMerge(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, run, map[string]string{
		"TRANSLATE_BATCH_SIZE": "3", "ASR_CHUNK_SECONDS": "5", "ASR_CONCURRENCY": "2"})
	s.Start()
	env := newParent(s, filepath.Join(fixtures(t), "jfk.wav"), true)
	s.Publish(env)
	waitMerged(s, env.TaskID)
	var chunks int
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM step_parts WHERE task_id = $1 AND step = 'asr'
		AND part LIKE 'chunk-%'`, env.TaskID).Scan(&chunks); err != nil || chunks < 2 {
		t.Fatalf("%d chunks (%v), want the audio cut", chunks, err)
	}
	checkChildren(t, s, env)
}

// checkChildren: the parent of env has a queued child per language, each
// with the parent's segments, its video and its translate batches covering
// every segment in order, on the parent's trace; the parent has no part of
// a later step.
func checkChildren(t *testing.T, s *testenv.Stack, env *wire.Envelope) {
	t.Helper()
	ctx := context.Background()
	parent := env.TaskID
	rows, err := s.DB.Pool.Query(ctx, `SELECT idx FROM segments WHERE task_id = $1 ORDER BY idx`, parent)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil || len(idx) < 2 {
		t.Fatalf("segments of the parent %v (%v), want the speech split into several", idx, err)
	}
	var want []string
	for _, i := range idx {
		want = append(want, wire.SegmentID(i))
	}
	segs := len(idx)
	f, err := task.FamilyOf(ctx, s.DB.Pool, parent)
	if err != nil || len(f.Children) != 2 {
		t.Fatalf("family %+v (%v), want two children", f, err)
	}
	batches := map[uuid.UUID][]string{}
	for _, c := range f.Children {
		child := wire.ChildTaskID(parent, c.TargetLanguage)
		if c.ID != child || c.Status != task.Queued {
			t.Errorf("child %+v, want %s queued", c, child)
		}
		var n int
		if err := s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM segments WHERE task_id = $1`, child).Scan(&n); err != nil || n != segs {
			t.Errorf("%s child: %d segments (%v), want the parent's %d", c.TargetLanguage, n, err, segs)
		}
		got, err := s.Blob.Get(ctx, wire.DefaultKeys(child).SourceVideo, 1<<20)
		if err != nil || !bytes.Equal(got, parentVideo) {
			t.Errorf("video of the %s child: %d bytes (%v), want the parent's", c.TargetLanguage, len(got), err)
		}
		batches[child] = nil
	}
	// The batches are published by the outbox after the merge commits, so
	// they may still be on their way: take them as they arrive until every
	// child's cover its segments (or the wait runs out and the check below
	// says what is missing).
	complete := func() bool {
		for _, ids := range batches {
			if len(ids) < len(want) {
				return false
			}
		}
		return true
	}
	testenv.Poll(time.Now().Add(testenv.Within(t, 30*time.Second)), func() bool {
		for n := s.Depth("task.translate"); n > 0; n-- {
			takeBatch(t, s, parent, env, batches)
		}
		return complete()
	})
	for child, ids := range batches {
		if !slices.Equal(ids, want) {
			t.Errorf("child %s: translate batches cover %v, want %v", child, ids, want)
		}
	}
	var own int
	if err := s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM step_parts WHERE task_id = $1 AND step <> 'asr'`, parent).Scan(&own); err != nil || own != 0 {
		t.Errorf("%d parts of later steps registered for the parent (%v), want none", own, err)
	}
}

// takeBatch takes the next translate message and adds its segments to its
// child's batches (messages of other tests' tasks are passed over).
func takeBatch(t *testing.T, s *testenv.Stack, parent uuid.UUID, env *wire.Envelope, batches map[uuid.UUID][]string) {
	t.Helper()
	var p wire.Translate
	m := s.NextMessage(t, "task.translate", &p)
	if m.TaskID == parent {
		t.Errorf("a translate batch of the parent itself: %+v", p)
		return
	}
	if _, ok := batches[m.TaskID]; !ok {
		return // another test's
	}
	if m.TraceID != env.TraceID || p.TaskID != m.TaskID || m.TaskID != wire.ChildTaskID(parent, p.TargetLanguage) ||
		len(p.SegmentIDs) > 3 || p.SourceLanguage != "en" {
		t.Errorf("translate message %+v payload %+v", m, p)
	}
	batches[m.TaskID] = append(batches[m.TaskID], p.SegmentIDs...)
}
