package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/dubflow/dubflow/pkg/view"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

func amqpJSON(body []byte) amqp.Publishing {
	return amqp.Publishing{MessageId: uuid.NewString(), ContentType: "application/json", Body: body}
}

// TestTTSCompensationFlow: a TTS engine failing for two chosen segments
// sends both to task.tts_compensation and leaves the task compensating
// without muxing; once the engine heals, tts_requeue -limit 1 re-drives one
// task, and that task finishes having synthesized only those two segments
// again.
func TestTTSCompensationFlow(t *testing.T) {
	t.Parallel()
	f := newFlow(t, nil)
	failing := []int{1, 3}
	f.engines.set(func(e *engines) {
		for _, i := range failing {
			e.ttsFail[translated(fakeSegments[i].Text)] = true
		}
	})
	f.start(append(append([]string{}, workers...), "dlq_recorder")...)
	first, second := f.submit(true), f.submit(true)
	for _, id := range []uuid.UUID{first, second} {
		f.waitStatus(id, 2*time.Minute, "compensating")
	}
	ctx := context.Background()
	for _, id := range []uuid.UUID{first, second} {
		// Both segments recorded against their segment by the recorder.
		var idx []int32
		testenv.Poll(time.Now().Add(testenv.Within(t, 30*time.Second)), func() bool {
			if err := f.db.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(segment_idx ORDER BY segment_idx), '{}')
				FROM tts_compensations WHERE task_id = $1`, id).Scan(&idx); err != nil {
				t.Fatal(err)
			}
			return len(idx) >= 2
		})
		if fmt.Sprint(idx) != "[1 3]" {
			t.Fatalf("task %s: compensations recorded for segments %v, want [1 3]", id, idx)
		}
		var muxed, parked int
		if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE step = 'mux_video'),
			count(*) FILTER (WHERE step = 'tts' AND status = 'parked') FROM task_steps WHERE task_id = $1`, id).
			Scan(&muxed, &parked); err != nil {
			t.Fatal(err)
		}
		if muxed != 0 || parked != 1 {
			t.Errorf("task %s: %d mux_video attempts and %d parked tts, want none and one", id, muxed, parked)
		}
	}
	_, before := f.engines.counts()

	f.engines.set(func(e *engines) { clear(e.ttsFail) })
	out, err := f.command("tts_requeue", "-limit", "1")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "requeued task"); n != 1 {
		t.Fatalf("tts_requeue -limit 1 requeued %d tasks:\n%s", n, out)
	}
	redriven, other := first, second
	if strings.Contains(out, second.String()) {
		redriven, other = second, first
	}
	f.waitStatus(redriven, 2*time.Minute, "done")
	if s, _ := f.status(other); s != "compensating" {
		t.Errorf("the task -limit 1 left is %s, want compensating", s)
	}
	_, after := f.engines.counts()
	for i, seg := range fakeSegments {
		text := translated(seg.Text)
		want := before[text]
		if i == failing[0] || i == failing[1] {
			want++
		}
		if after[text] != want {
			t.Errorf("segment %d synthesized %d times in all, want %d (only the failed segments again)", i, after[text], want)
		}
	}

	out, err = f.command("tts_requeue")
	if err != nil || !strings.Contains(out, other.String()) {
		t.Fatalf("second tts_requeue: %v\n%s", err, out)
	}
	f.waitStatus(other, 2*time.Minute, "done")
	var pending int
	if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM tts_compensations WHERE requeued_at IS NULL`).Scan(&pending); err != nil || pending != 0 {
		t.Errorf("%d compensations not marked requeued (%v)", pending, err)
	}
}

// TestPermanentFailureInEachStepThenReplay forces a permanent failure in
// each of the five steps in turn: the dead letter is recorded with its step
// and reason and the task fails; after the cause is fixed, dubctl dlq
// replay finishes the task.
func TestPermanentFailureInEachStepThenReplay(t *testing.T) {
	t.Parallel()
	f := newFlow(t, nil)
	f.start(append(append([]string{}, workers...), "dlq_recorder")...)
	ctx := context.Background()
	cases := []struct {
		step, reason string
		// submit starts the task and breaks the step; fix repairs the cause.
		submit func() uuid.UUID
		fix    func(id uuid.UUID)
	}{
		{
			step: wire.StepExtractAudio, reason: "not found",
			submit: func() uuid.UUID { return f.submit(false) }, // the video was never uploaded
			fix:    func(id uuid.UUID) { f.upload(id) },
		},
		{
			step: wire.StepASR, reason: "400",
			submit: func() uuid.UUID {
				f.engines.set(func(e *engines) { e.asrBroken = true })
				return f.submit(true)
			},
			fix: func(uuid.UUID) { f.engines.set(func(e *engines) { e.asrBroken = false }) },
		},
		{
			step: wire.StepTranslate, reason: "400",
			submit: func() uuid.UUID {
				f.engines.set(func(e *engines) { e.translateBroken = true })
				return f.submit(true)
			},
			fix: func(uuid.UUID) { f.engines.set(func(e *engines) { e.translateBroken = false }) },
		},
		{
			// A segment whose translation went missing before synthesis.
			step: wire.StepTTS, reason: "has no translation",
			submit: func() uuid.UUID {
				f.stopOne("tts")
				id := f.submit(true)
				f.waitSucceeded(id, wire.StepTranslate)
				if _, err := f.db.Pool.Exec(ctx, `UPDATE segments SET mt_text = NULL WHERE task_id = $1 AND idx = 2`, id); err != nil {
					t.Fatal(err)
				}
				f.start("tts")
				return id
			},
			fix: func(id uuid.UUID) {
				if _, err := f.db.Pool.Exec(ctx, `UPDATE segments SET mt_text = $2 WHERE task_id = $1 AND idx = 2`,
					id, translated(fakeSegments[2].Text)); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			// The source video disappeared from storage before muxing.
			step: wire.StepMuxVideo, reason: "not found",
			submit: func() uuid.UUID {
				f.stopOne("mux_video")
				id := f.submit(true)
				f.waitSucceeded(id, wire.StepTTS)
				if err := f.blob.Remove(ctx, wire.DefaultKeys(id).SourceVideo); err != nil {
					t.Fatal(err)
				}
				f.start("mux_video")
				return id
			},
			fix: func(id uuid.UUID) { f.upload(id) },
		},
	}
	for _, c := range cases {
		t.Run(c.step, func(t *testing.T) {
			id := c.submit()
			f.waitStatus(id, 2*time.Minute, "failed")
			dl := waitDeadLetter(t, f, id)
			if dl.Step != c.step || !strings.Contains(dl.FailureReason, c.reason) || dl.ErrorClass != wire.ClassPermanent {
				t.Fatalf("dead letter %+v, want step %s, class permanent, reason naming %q", dl, c.step, c.reason)
			}
			if _, e := f.status(id); !strings.HasPrefix(e, c.step+":") {
				t.Errorf("task error %q, want it to name %s", e, c.step)
			}
			c.fix(id)
			out, err := f.command("dubctl", "dlq", "replay", fmt.Sprint(dl.ID))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "republished as attempt") {
				t.Errorf("dubctl dlq replay printed %q", out)
			}
			f.waitStatus(id, 2*time.Minute, "done")
			if _, err := f.command("dubctl", "dlq", "replay", fmt.Sprint(dl.ID)); err == nil ||
				!strings.Contains(err.Error(), "already replayed") {
				t.Errorf("a second replay of the same dead letter: %v, want refused", err)
			}
		})
	}
}

// dlRow is a dead letter as dubctl dlq list --json prints it: the read
// model's shape.
type dlRow = view.DeadLetter

// waitDeadLetter waits until dubctl dlq list shows a dead letter of task id.
func waitDeadLetter(t *testing.T, f *flow, id uuid.UUID) dlRow {
	t.Helper()
	var found dlRow
	testenv.EventuallyWithin(t, 30*time.Second, "a dead letter recorded for task "+id.String(), func() bool {
		out, err := f.command("dubctl", "dlq", "list", "--pending", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var rows []dlRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("dlq list --json: %v\n%s", err, out)
		}
		for _, r := range rows {
			if r.TaskID != nil && *r.TaskID == id {
				found = r
				return true
			}
		}
		return false
	})
	return found
}
