package step_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// barrier holds every caller until n have arrived, then lets them all go at
// the same moment.
type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	open    chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// overlapTask is a task whose asr step is one chunk (succeeded) and the
// merge (to run), with translate batches of two segments each registered.
type overlapTask struct {
	id      uuid.UUID
	batches [][]string
	merge   *wire.Envelope
	msgs    []*wire.Envelope // one translate message per batch
}

func (h *harness) overlapTask(batches int) overlapTask {
	h.t.Helper()
	ctx := context.Background()
	asr := asrEnvelope(h.t)
	o := overlapTask{id: asr.TaskID}
	keys := wire.DefaultKeys(o.id)
	if _, err := h.db.Pool.Exec(ctx, `INSERT INTO tasks (id, status) VALUES ($1, 'running')`, o.id); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.db.Pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'asr', 'chunk-00000'), ($1, 'asr', 'merge')`, o.id); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, finished_at)
		VALUES ($1, 'asr', 'chunk-00000', 1, 'succeeded', now())`, o.id); err != nil {
		h.t.Fatal(err)
	}
	merge, err := asr.Next(wire.StepASR, wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR, Merge: true})
	if err != nil {
		h.t.Fatal(err)
	}
	o.merge = merge
	for i := range batches {
		ids := []string{wire.SegmentID(2 * i), wire.SegmentID(2*i + 1)}
		env, err := asr.Next(wire.StepTranslate, wire.Translate{TaskID: o.id, SegmentIDs: ids, SourceLanguage: "en", TargetLanguage: "es"})
		if err != nil {
			h.t.Fatal(err)
		}
		if _, err := h.db.Pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', $2)`,
			o.id, wire.PartByIDs(ids)); err != nil {
			h.t.Fatal(err)
		}
		o.batches = append(o.batches, ids)
		o.msgs = append(o.msgs, env)
	}
	return o
}

// overlapRoutes are the asr merge and translate batches of the stages'
// overlap as services/asr and services/translate stage them: a batch emits
// its tts part once asr is complete, the merge the parts of the batches
// already done; before staging, each waits at its barrier.
func overlapRoutes(tasks map[uuid.UUID]overlapTask, asrGate, translateGate func(context.Context, *step.Message) error) (asr, translate []step.Route) {
	merge := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		if err := asrGate(ctx, msg); err != nil {
			return err
		}
		for _, ids := range tasks[msg.Envelope.TaskID].batches {
			if err := msg.EmitWhenPartDone(wire.StepTTS, wire.TTS{TaskID: msg.Envelope.TaskID, SegmentIDs: ids},
				wire.StepTranslate, wire.PartByIDs(ids)); err != nil {
				return err
			}
		}
		return nil
	})
	batch := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		var p wire.Translate
		if err := msg.Decode(&p); err != nil {
			return err
		}
		if err := translateGate(ctx, msg); err != nil {
			return err
		}
		return msg.EmitWhenOthersDone(wire.StepTTS, wire.TTS{TaskID: p.TaskID, SegmentIDs: p.SegmentIDs}, wire.StepASR)
	})
	return []step.Route{{Step: wire.StepASR, Timeout: time.Minute, Handler: merge}},
		[]step.Route{{Step: wire.StepTranslate, Timeout: time.Minute, Handler: batch}}
}

// ttsRoute is a tts part as services/tts stages it: the mux_video fan-in
// over asr, translate and tts. It waits for translate, as the worker's
// route does (wire.Previous) — a part waits only for asr (wire.TTS.After).
func ttsRoute(gate func(context.Context, *step.Message) error) []step.Route {
	h := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		if err := gate(ctx, msg); err != nil {
			return err
		}
		id := msg.Envelope.TaskID
		keys := wire.DefaultKeys(id)
		return msg.EmitWhenStepsDone(wire.StepMuxVideo, wire.MuxVideo{TaskID: id, SourceVideoKey: keys.SourceVideo,
			TTSAudioKey: keys.DubAudio, OutputVideoKey: keys.OutputVideo}, wire.StepASR, wire.StepTranslate)
	})
	return []step.Route{{Step: wire.StepTTS, After: wire.Previous(wire.StepTTS), Timeout: time.Minute, Handler: h}}
}

// TestOverlapEmitsEachTTSPartOnceAndMuxOnce: the merge that completes asr
// and every translate batch of two tasks commit at the same moment, on
// several runners: each batch's tts part is emitted exactly once (by the
// batch or by the merge, whichever commits last); then every tts part
// finishes at the same moment and mux_video is emitted exactly once per
// task.
func TestOverlapEmitsEachTTSPartOnceAndMuxOnce(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const batches = 5
	tasks := map[uuid.UUID]overlapTask{}
	var order []overlapTask
	for range 2 {
		o := h.overlapTask(batches)
		tasks[o.id] = o
		order = append(order, o)
	}
	// The outbox sweep at its production age (10 s), not the harness's 1 s:
	// this test counts the copies in the queues, and a publish whose confirm
	// comes later than half the sweep's age (a loaded CI machine's broker)
	// is published again by the sweep — a second copy of one message, with
	// its id, which consumers skip, but a copy all the same.
	sweep := func(c *step.Config) { c.SweepAge = 10 * time.Second }
	all := newBarrier(len(tasks) * (batches + 1))
	gate := func(ctx context.Context, _ *step.Message) error { return all.wait(ctx) }
	asrRoutes, translateRoutes := overlapRoutes(tasks, gate, gate)
	_, stopASR := h.start(wire.QueueASR, asrRoutes, sweep)
	defer stopASR()
	_, stopT1 := h.start(wire.QueueTranslate, translateRoutes, sweep)
	defer stopT1()
	_, stopT2 := h.start(wire.QueueTranslate, translateRoutes, sweep)
	defer stopT2()
	for _, o := range order {
		h.publish(o.merge)
		for _, m := range o.msgs {
			h.publish(m)
		}
	}
	ctx := context.Background()
	testenv.EventuallyWithin(t, time.Minute, "asr and every batch to succeed, the outbox empty", func() bool {
		var n int
		err := h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE status = 'succeeded'
			AND ((step = 'asr' AND part = 'merge') OR step = 'translate')`).Scan(&n)
		return err == nil && n == len(tasks)*(batches+1) && h.outboxRows() == 0
	})
	stopASR()
	stopT1()
	stopT2()
	if n := h.ready(wire.QueueTTS); n != len(tasks)*batches {
		t.Fatalf("%d tts messages, want %d: one per batch", n, len(tasks)*batches)
	}
	seen := map[string]bool{}
	var parts []*wire.Envelope
	for range len(tasks) * batches {
		env, err := wire.Decode(h.next(wire.QueueTTS, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var p wire.TTS
		if err := env.UnmarshalPayload(&p); err != nil {
			t.Fatal(err)
		}
		key := env.TaskID.String() + "/" + strings.Join(p.SegmentIDs, ",")
		if seen[key] {
			t.Errorf("tts part %s emitted twice", key)
		}
		seen[key] = true
		parts = append(parts, env)
	}

	// Every tts part of both tasks finishes at the same moment.
	ttsAll := newBarrier(len(parts))
	_, stop1 := h.start(wire.QueueTTS, ttsRoute(func(ctx context.Context, _ *step.Message) error { return ttsAll.wait(ctx) }), sweep)
	defer stop1()
	_, stop2 := h.start(wire.QueueTTS, ttsRoute(func(ctx context.Context, _ *step.Message) error { return ttsAll.wait(ctx) }), sweep)
	defer stop2()
	for _, env := range parts {
		h.publish(env)
	}
	testenv.EventuallyWithin(t, time.Minute, "every tts part to succeed, the outbox empty", func() bool {
		var n int
		err := h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE step = 'tts' AND status = 'succeeded'`).Scan(&n)
		return err == nil && n == len(parts) && h.outboxRows() == 0
	})
	stop1()
	stop2()
	if n := h.ready(wire.QueueMuxVideo); n != len(tasks) {
		t.Fatalf("%d mux_video messages, want exactly one per task (%d)", n, len(tasks))
	}
	got := map[uuid.UUID]bool{}
	for range len(tasks) {
		env, err := wire.Decode(h.next(wire.QueueMuxVideo, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got[env.TaskID] = true
	}
	for id := range tasks {
		if !got[id] {
			t.Errorf("task %s: no mux_video message", id)
		}
	}
}

// TestATTSPartRunsWhileTheLastBatchIsStillTranslated: asr is complete and
// the last translate batch is held; the other batches' tts parts run (their
// route waits for translate, a part only for asr) and succeed before it
// finishes, without mux_video; once it finishes, its own part completes the
// task's fan-in and mux_video is emitted once.
func TestATTSPartRunsWhileTheLastBatchIsStillTranslated(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const batches = 3
	o := h.overlapTask(batches)
	ctx := context.Background()
	if _, err := h.db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, finished_at)
		VALUES ($1, 'asr', 'merge', 1, 'succeeded', now())`, o.id); err != nil {
		t.Fatal(err)
	}
	last := wire.PartByIDs(o.batches[batches-1])
	hold := make(chan struct{})
	translateGate := func(ctx context.Context, msg *step.Message) error {
		if msg.Part != last {
			return nil
		}
		select {
		case <-hold:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	open := func(context.Context, *step.Message) error { return nil }
	_, translateRoutes := overlapRoutes(map[uuid.UUID]overlapTask{o.id: o}, open, translateGate)
	h.run(wire.QueueTranslate, translateRoutes)
	var mu sync.Mutex
	var ran []string
	h.run(wire.QueueTTS, ttsRoute(func(_ context.Context, msg *step.Message) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, msg.Part)
		return nil
	}))
	for _, m := range o.msgs {
		h.publish(m)
	}
	testenv.EventuallyWithin(t, time.Minute, "the tts parts of the batches not held to succeed", func() bool {
		var n int
		err := h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'tts' AND status = 'succeeded'`, o.id).Scan(&n)
		return err == nil && n == batches-1
	})
	var lastDone bool
	if err := h.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM task_steps WHERE task_id = $1 AND step = 'translate'
		AND part = $2 AND status = 'succeeded')`, o.id, last).Scan(&lastDone); err != nil || lastDone {
		t.Fatalf("the held batch succeeded (%v) before the others' tts parts ran", err)
	}
	if n := h.ready(wire.QueueMuxVideo); n != 0 {
		t.Fatalf("%d mux_video messages while a batch is still translated", n)
	}
	close(hold)
	env, err := wire.Decode(h.next(wire.QueueMuxVideo, 30*time.Second))
	if err != nil || env.TaskID != o.id {
		t.Fatalf("mux_video message %+v, %v", env, err)
	}
	testenv.EventuallyWithin(t, time.Minute, "the outbox to be empty", func() bool { return h.outboxRows() == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != batches || ran[batches-1] != last {
		t.Errorf("tts parts ran %v, want the held batch's part last of %d", ran, batches)
	}
	if n := h.ready(wire.QueueMuxVideo); n != 0 {
		t.Errorf("%d more mux_video messages, want exactly one", n)
	}
}
