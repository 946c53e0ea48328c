package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/cores"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestASRFansOut runs one worker with 5 s chunks on the 11 s jfk fixture, sent as the seed's whole-audio message (twice), then redelivers
// every chunk message and the merge twice more: the step fans out into
// chunks, every chunk succeeds once, the merge runs once, and the segments
// and translate batches are each staged exactly once.
func TestASRFansOut(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, run, map[string]string{
		"TRANSLATE_BATCH_SIZE": "3", "ASR_CHUNK_SECONDS": "5", "ASR_CONCURRENCY": "2"})
	s.Start()
	ctx := context.Background()
	env := newTask(s, filepath.Join(fixtures(t), "jfk.wav"))
	id := env.TaskID
	s.Publish(env)
	s.Publish(env)
	waitMerged(s, id)

	// Redeliver every chunk and the merge twice, then a sentinel task: the
	// one consumer serves its queue in order, so once the sentinel is done
	// every duplicate before it has been handled.
	rows, err := s.DB.Pool.Query(ctx, `SELECT message FROM step_parts WHERE task_id = $1 AND step = 'asr'`, id)
	if err != nil {
		t.Fatal(err)
	}
	var again [][]byte
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		again = append(again, body, body)
	}
	rows.Close()
	for _, body := range again {
		s.PublishRaw("task.asr", body)
	}
	s.Publish(env)
	sentinel := newTask(s, filepath.Join(fixtures(t), "jfk.wav"))
	s.Publish(sentinel)
	if got := s.WaitStep(sentinel.TaskID, wire.StepASR, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("sentinel asr %s", got)
	}
	checkChunks(t, s, id)
	segs := checkSegments(t, s, id)
	checkBatches(t, s, id, segs)
}

// waitMerged waits until the task's merge part has succeeded: up to ten
// minutes, as the machines the tests run on may transcribe far slower than
// real time when loaded.
func waitMerged(s *testenv.Stack, id uuid.UUID) {
	s.T.Helper()
	testenv.EventuallyWithin(s.T, 10*time.Minute, "the chunks of "+id.String()+" to be merged", func() bool {
		var n int
		err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM task_steps
			WHERE task_id = $1 AND step = 'asr' AND part = 'merge' AND status = 'succeeded'`, id).Scan(&n)
		return err == nil && n == 1
	})
}

// checkChunks: several chunks, each part succeeded exactly once and ran
// once, the merge registered once, no chunk held back, the step succeeded.
func checkChunks(t *testing.T, s *testenv.Stack, id uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	var chunks, merges, held, extra int
	var done bool
	err := s.DB.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM step_parts WHERE task_id = $1 AND step = 'asr' AND part LIKE 'chunk-%'),
		(SELECT count(*) FROM step_parts WHERE task_id = $1 AND step = 'asr' AND part = 'merge'),
		(SELECT count(*) FROM held_parts WHERE task_id = $1 AND step = 'asr'),
		(SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'asr' AND attempt = 1
		    GROUP BY part ORDER BY count(*) DESC LIMIT 1) - 1,
		step_succeeded($1, 'asr')`, id).Scan(&chunks, &merges, &held, &extra, &done)
	if err != nil {
		t.Fatal(err)
	}
	if chunks < 2 || merges != 1 || held != 0 || extra != 0 || !done {
		t.Errorf("%d chunk parts (want 2 or more for 11 s in 5 s chunks), %d merges, %d held, %d extra attempts of a part, step done %v",
			chunks, merges, held, extra, done)
	}
}

// checkSegments: the segments follow the timeline, recognise the fixture's
// words, and asr.json holds the same.
func checkSegments(t *testing.T, s *testenv.Stack, id uuid.UUID) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := s.DB.Pool.Query(ctx, `SELECT idx, start_ms, end_ms, src_text FROM segments WHERE task_id = $1 ORDER BY idx`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids, texts []string
	lastEnd := 0
	for rows.Next() {
		var idx, start, end int
		var text string
		if err := rows.Scan(&idx, &start, &end, &text); err != nil {
			t.Fatal(err)
		}
		if start < lastEnd-500 || end < start || end > 12000 {
			t.Errorf("segment %d [%d, %d] out of order (previous ended %d)", idx, start, end, lastEnd)
		}
		lastEnd = end
		ids, texts = append(ids, wire.SegmentID(idx)), append(texts, text)
	}
	if all := strings.Join(texts, " "); !strings.Contains(all, "country") || len(ids) < 2 {
		t.Errorf("%d segments: %q", len(ids), all)
	}
	doc, _ := readTranscript(ctx, t, s, id)
	var docIDs []string
	for _, seg := range doc.Segments {
		docIDs = append(docIDs, seg.ID)
	}
	if !slices.Equal(docIDs, ids) {
		t.Errorf("asr.json segments %v, rows %v", docIDs, ids)
	}
	return ids
}

// checkBatches: the translate messages of the task — those in the queue,
// at most the window (cores.Usable) of them, and those held back until
// earlier batches succeed — cover every segment exactly once.
func checkBatches(t *testing.T, s *testenv.Stack, id uuid.UUID, want []string) {
	t.Helper()
	var got []string
	queued := 0
	for n := s.Depth("task.translate"); n > 0; n-- {
		var p wire.Translate
		m := s.NextMessage(t, "task.translate", &p)
		if m.TaskID == id {
			got = append(got, p.SegmentIDs...)
			queued++
		}
	}
	if queued > cores.Usable() {
		t.Errorf("%d translate batches of the task in the queue at once, want at most %d (the window)", queued, cores.Usable())
	}
	rows, err := s.DB.Pool.Query(context.Background(), `SELECT body FROM held_parts WHERE task_id = $1 AND step = 'translate'`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		env, err := wire.Decode(body)
		var p wire.Translate
		if err == nil {
			err = env.UnmarshalPayload(&p)
		}
		if err != nil {
			t.Fatalf("held translate batch: %v", err)
		}
		got = append(got, p.SegmentIDs...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("translate batches carry %v, want each segment once: %v", got, want)
	}
}
