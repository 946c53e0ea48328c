package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// newTask creates a task whose asr step succeeded with the given segment
// texts and registered translate parts (batches of ids), and returns the
// translate messages, one per batch.
func newTask(s *testenv.Stack, texts []string, batches [][]int) []*wire.Envelope {
	s.T.Helper()
	ctx := context.Background()
	id := uuid.New()
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, speaker_id)
		VALUES ($1, 'running', 'en', 'es', 'es+f2')`, id); err != nil {
		s.T.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'asr', 1, 'succeeded', now())`, id); err != nil {
		s.T.Fatal(err)
	}
	for i, text := range texts {
		if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text)
			VALUES ($1, $2, $3, $4, $5)`, id, i, i*2000, i*2000+1500, text); err != nil {
			s.T.Fatal(err)
		}
	}
	var out []*wire.Envelope
	for _, b := range batches {
		var ids []string
		for _, i := range b {
			ids = append(ids, wire.SegmentID(i))
		}
		env, err := wire.New(wire.StepTranslate, id, "trace-fanin", wire.Translate{
			TaskID: id, SegmentIDs: ids, SourceLanguage: "en", TargetLanguage: "es",
		})
		if err != nil {
			s.T.Fatal(err)
		}
		if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', $2)`,
			id, strings.Join(ids, ",")); err != nil {
			s.T.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

// TestTranslate runs one worker (starting a stack costs seconds) handling
// three batches at once.
func TestTranslate(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, run, map[string]string{"WORKER_CONCURRENCY": "3", "TRANSLATE_BATCH_SIZE": "2"})
	s.Start()
	t.Run("fan-in emits exactly one tts", func(t *testing.T) { fanIn(t, s) })
	t.Run("missing segment is permanent", func(t *testing.T) { missingSegment(t, s) })
	t.Run("glossary", func(t *testing.T) { glossary(t, s) })
	t.Run("announces its pairs", func(t *testing.T) { announces(t, s) })
}

// announces: the worker tells the doors the pairs of its installed
// Apertium modes (pkg/admit), which judge a task's languages by them.
func announces(t *testing.T, s *testenv.Stack) {
	var caps admit.Capabilities
	testenv.Eventually(t, "translate announces its pairs", func() bool {
		var err error
		caps, err = admit.LoadCapabilities(context.Background(), s.DB.Pool)
		return err == nil && len(caps) > 0
	})
	if caps[0].Step != wire.StepTranslate || caps[0].Engine != "apertium" || !slices.Contains(caps[0].Languages, "en|es") {
		t.Fatalf("announced %+v, want apertium's en|es", caps)
	}
	if err := admit.Languages("en", []string{"xx"}, caps); err == nil ||
		!strings.HasPrefix(err.Error(), `target "xx": no translation from en to xx (installed: en→`) {
		t.Fatalf("xx judged by the announcement: %v", err)
	}
}

func fanIn(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	texts := []string{"Hello, my friend.", "The house is big.", "", "I want to eat now.", "Thank you very much."}
	msgs := newTask(s, texts, [][]int{{0, 1}, {2, 3}, {4}})
	id := msgs[0].TaskID
	for _, m := range msgs {
		s.Publish(m)
	}
	s.WaitFor("every batch to succeed", func() bool {
		var n int
		err := s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'translate' AND status = 'succeeded'`, id).Scan(&n)
		return err == nil && n == len(msgs)
	})

	rows, err := s.DB.Pool.Query(ctx, `SELECT idx, mt_text FROM segments WHERE task_id = $1 ORDER BY idx`, id)
	if err != nil {
		t.Fatal(err)
	}
	var mt []*string
	for rows.Next() {
		var idx int
		var m *string
		if err := rows.Scan(&idx, &m); err != nil {
			t.Fatal(err)
		}
		mt = append(mt, m)
	}
	if len(mt) != len(texts) {
		t.Fatalf("%d segments", len(mt))
	}
	for i, m := range mt {
		switch {
		case m == nil:
			t.Errorf("segment %d: mt_text is NULL", i)
		case texts[i] == "" && *m != "":
			t.Errorf("segment %d: empty text translated to %q", i, *m)
		case texts[i] != "" && (*m == "" || *m == texts[i]):
			t.Errorf("segment %d: %q translated to %q", i, texts[i], *m)
		}
	}
	if mt[0] != nil && !strings.Contains(strings.ToLower(*mt[0]), "hola") {
		t.Errorf("%q → %q, want Spanish", texts[0], *mt[0])
	}

	// Each batch emits its own tts part, naming exactly its segments
	// (stages overlap: synthesis of a batch starts while later ones are
	// still translated); a duplicate of a finished batch is skipped and
	// emits nothing.
	s.Publish(msgs[2])
	want := map[string]bool{"seg-0,seg-1": true, "seg-2,seg-3": true, "seg-4": true}
	for range msgs {
		var p wire.TTS
		tts := s.NextMessage(t, "task.tts", &p)
		if tts.TaskID != id || tts.TraceID != "trace-fanin" || p.TaskID != id || p.SpeakerID != "es+f2" {
			t.Errorf("tts message %+v payload %+v", tts, p)
		}
		part := strings.Join(p.SegmentIDs, ",")
		if !want[part] {
			t.Errorf("tts part %q: not a batch, or twice", part)
		}
		delete(want, part)
	}
	s.WaitFor("the duplicate to be consumed", func() bool { return s.Depth("task.translate") == 0 })
	var outbox int
	s.WaitFor("the outbox to drain", func() bool {
		err := s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&outbox)
		return err == nil && outbox == 0
	})
	if n := s.Depth("task.tts"); n != 0 {
		t.Errorf("%d more tts messages, want exactly one per batch", n)
	}
}

func missingSegment(t *testing.T, s *testenv.Stack) {
	msgs := newTask(s, []string{"Good morning."}, [][]int{{0, 7}})
	s.Publish(msgs[0])
	if got := s.WaitStep(msgs[0].TaskID, wire.StepTranslate, "succeeded", "failed"); got != "failed" {
		t.Fatalf("translate %s, want failed", got)
	}
	dl, err := wire.DecodeDeadLetter(s.Next("task.dlq", 10e9))
	if err != nil {
		t.Fatal(err)
	}
	if dl.ErrorClass != wire.ClassPermanent || !strings.Contains(dl.FailureReason, "seg-7") {
		t.Errorf("dead letter %+v", dl)
	}
}
