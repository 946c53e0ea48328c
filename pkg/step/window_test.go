package step_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// chunkGate runs the chunk parts of a test: each call records its task and
// waits until the test lets one call of that task through.
type chunkGate struct {
	mu    sync.Mutex
	calls []uuid.UUID
	gates map[uuid.UUID]chan struct{}
}

func (g *chunkGate) handle(ctx context.Context, msg *step.Message) error {
	var p wire.ASR
	if err := msg.Decode(&p); err != nil {
		return err
	}
	if p.Chunk == nil {
		var chunks []any
		for i := range 4 {
			chunks = append(chunks, wire.ASR{AudioKey: p.AudioKey, Language: "en", OutputKey: p.OutputKey,
				Chunk: &wire.ASRChunk{Index: i}})
		}
		return msg.EmitWindowed(wire.StepASR, 2, chunks)
	}
	id := msg.Envelope.TaskID
	g.mu.Lock()
	g.calls = append(g.calls, id)
	gate := g.gates[id]
	g.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	msg.ReleaseWindow()
	return nil
}

func (g *chunkGate) called() []uuid.UUID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]uuid.UUID(nil), g.calls...)
}

// TestWindowIsSharedByAProjectAndItsTasksTakeTurns: two tasks of one
// project, each fanned out into 4 parts with a window of 2, have 2 parts in
// flight between them, not 4, while a task without a project has its own 2;
// when a part of the first task finishes, the next part released is the
// second task's (turns), and every part runs once in the end.
func TestWindowIsSharedByAProjectAndItsTasksTakeTurns(t *testing.T) {
	t.Parallel()
	h := setup(t)
	g := &chunkGate{gates: map[uuid.UUID]chan struct{}{}}
	h.run(wire.QueueASR, []step.Route{{Step: wire.StepASR, Timeout: time.Minute, Handler: step.HandlerFunc(g.handle)}})
	ctx := context.Background()
	var envs []*wire.Envelope
	for _, project := range []string{"studio", "studio", ""} {
		env := asrEnvelope(t)
		if _, err := h.db.Pool.Exec(ctx, `INSERT INTO tasks (id, status, project) VALUES ($1, 'running', $2)`, env.TaskID, project); err != nil {
			t.Fatal(err)
		}
		g.gates[env.TaskID] = make(chan struct{})
		envs = append(envs, env)
	}
	a, b, c := envs[0].TaskID, envs[1].TaskID, envs[2].TaskID
	for _, env := range envs {
		h.publish(env)
		// One at a time, so that the first task fills the project's window.
		testenv.EventuallyWithin(t, time.Minute, "the fan-out", func() bool {
			var n int
			err := h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM step_parts WHERE task_id = $1`, env.TaskID).Scan(&n)
			return err == nil && n == 4
		})
	}
	testenv.EventuallyWithin(t, time.Minute, "four parts running", func() bool { return len(g.called()) == 4 })
	if n := h.held(a) + h.held(b); n != 6 || h.held(c) != 2 {
		t.Fatalf("held: %d of the project's 8 parts (want 6), %d of the other task's 4 (want 2)", n, h.held(c))
	}
	count := func(id uuid.UUID) (n int) {
		for _, c := range g.called() {
			if c == id {
				n++
			}
		}
		return n
	}
	if count(a) != 2 || count(b) != 0 || count(c) != 2 {
		t.Fatalf("running: %d, %d, %d parts of the three tasks; want 2, 0, 2", count(a), count(b), count(c))
	}
	g.gates[a] <- struct{}{}
	testenv.EventuallyWithin(t, time.Minute, "the next part", func() bool { return len(g.called()) == 5 })
	if next := g.called()[4]; next != b {
		t.Errorf("after a part of the first task, a part of %s ran; want the second task's (turns)", next)
	}
	for _, id := range []uuid.UUID{a, b, c} {
		close(g.gates[id])
	}
	testenv.EventuallyWithin(t, 2*time.Minute, "every part", func() bool { return len(g.called()) == 12 })
	for _, id := range []uuid.UUID{a, b, c} {
		testenv.EventuallyWithin(t, time.Minute, "the step to succeed", func() bool {
			var done bool
			err := h.db.Pool.QueryRow(ctx, `SELECT step_succeeded($1, 'asr')`, id).Scan(&done)
			return err == nil && done
		})
		if n := h.held(id); n != 0 {
			t.Errorf("task %s: %d parts still held", id, n)
		}
	}
}

// held counts the task's held parts.
func (h *harness) held(id uuid.UUID) int {
	h.t.Helper()
	var n int
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM held_parts WHERE task_id = $1`, id).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}
