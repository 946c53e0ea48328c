package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Bounds of TestCancelDuringASRStopsTheChain (issue 47): the asr attempt
// ends within cancelBound of the cancel's commit, and the asr worker's
// processes stop decoding within that bound too — a quiet window of
// quietWindow in which they used less than quietCPU CPU-seconds (a decode
// uses a whole core: 0.5 CPU-s in such a window, at least half of it on
// this shared machine).
const (
	cancelBound = 2 * time.Second
	quietWindow = 500 * time.Millisecond
	quietCPU    = 0.1
)

// TestCancelDuringASRStopsTheChain runs the real workers, submits the 44 s
// clip and cancels the task while asr decodes it, as the console does: the
// asr attempt ends within 2 s of the cancel's commit, closed as stopped
// (neither retried nor dead-lettered); the asr worker stops decoding
// within 2 s (its processes' CPU time stops growing); no translate, tts or
// mux_video message or attempt of the task exists; and the timeline ends
// with "ended cancelled".
func TestCancelDuringASRStopsTheChain(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := s.submit(t, ctx, fixtureVideo(t, ctx, "two_cities.wav", 0))
	asr := s.procs["asr"].Cmd.Process.Pid

	// Cancel once the decoder is busy: the asr attempt runs and its
	// processes burn CPU.
	s.waitStep(t, ctx, id, "asr", "running")
	base := clipsProcTable(t).tree(asr)
	testenv.Eventually(t, "the asr worker decoding", func() bool { return clipsProcTable(t).tree(asr)-base > 0.5 })
	if _, err := task.Apply(ctx, s.db.Pool, task.Cancel(task.Ref{ID: id}, "test: cancel during asr")); err != nil {
		t.Fatal(err)
	}
	cancelledAt := time.Now()
	var committed time.Time
	if err := s.db.Pool.QueryRow(ctx, `SELECT updated_at FROM tasks WHERE id = $1`, id).Scan(&committed); err != nil {
		t.Fatal(err)
	}

	quiet := s.quietAfter(t, asr, cancelledAt)
	if quiet > cancelBound {
		t.Errorf("the asr worker decoded on for %s after the cancel, want at most %s", quiet.Round(10*time.Millisecond), cancelBound)
	}
	t.Logf("the asr worker's processes quiet (< %.1f CPU-s in %s) from %s after the cancel", quietCPU, quietWindow, quiet.Round(10*time.Millisecond))
	// Every asr attempt running at the cancel (the chunks of the clip)
	// ends stopped, within the bound.
	for _, e := range s.asrEndedAfter(t, ctx, id, committed) {
		if e.status != "failed" || e.reason != "task cancelled while the step ran; step stopped" {
			t.Errorf("asr %s ended %s (%q), want failed: stopped by the cancel", e.part, e.status, e.reason)
		}
		if e.after > cancelBound {
			t.Errorf("asr %s ended %s after the cancel committed, want within %s", e.part, e.after.Round(time.Millisecond), cancelBound)
		}
		t.Logf("asr %s ended %s after the cancel committed", e.part, e.after.Round(time.Millisecond))
	}
	s.checkNothingAfterASR(t, ctx, id)
}

// ended is an attempt that ended after a time: its part, status and error,
// and how long after that time it ended.
type ended struct {
	part, status, reason string
	after                time.Duration
}

// asrEndedAfter waits until every asr attempt of the task that was running
// at since has ended, and returns them.
func (s *stack) asrEndedAfter(t *testing.T, ctx context.Context, id uuid.UUID, since time.Time) []ended {
	t.Helper()
	var out []ended
	testenv.EventuallyWithin(t, 30*time.Second, "the asr attempts closed", func() bool {
		rows, err := s.db.Pool.Query(ctx, `SELECT part, status, error, coalesce(finished_at - $2, interval '1 hour')
			FROM task_steps WHERE task_id = $1 AND step = 'asr' AND (finished_at IS NULL OR finished_at > $2)`, id, since)
		if err != nil {
			return false
		}
		out = out[:0]
		var e ended
		_, err = pgx.ForEachRow(rows, []any{&e.part, &e.status, &e.reason, &e.after}, func() error {
			out = append(out, e)
			return nil
		})
		for _, e := range out {
			if e.status == "running" {
				return false
			}
		}
		return err == nil && len(out) > 0
	})
	return out
}

// waitStep waits until an attempt of the task's step has status.
func (s *stack) waitStep(tb testing.TB, ctx context.Context, id uuid.UUID, stepName, status string) {
	tb.Helper()
	testenv.Eventually(tb, stepName+" "+status, func() bool {
		var n int
		err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = $2 AND status = $3`,
			id, stepName, status).Scan(&n)
		return err == nil && n > 0
	})
}

// quietAfter samples the CPU time of pid's process tree from since on and
// returns how long after since the first quietWindow began in which it
// used less than quietCPU; it fails the test when none begins within 10 s.
func (s *stack) quietAfter(tb testing.TB, pid int, since time.Time) time.Duration {
	tb.Helper()
	type sample struct {
		at  time.Time
		cpu float64
	}
	var samples []sample
	var quiet time.Duration
	found := testenv.Poll(since.Add(testenv.Within(tb, 10*time.Second)), func() bool {
		now := sample{time.Now(), clipsProcTable(tb).tree(pid)}
		samples = append(samples, now)
		for _, old := range samples {
			if now.at.Sub(old.at) >= quietWindow && now.cpu-old.cpu < quietCPU {
				quiet = old.at.Sub(since)
				return true
			}
		}
		return false
	})
	if !found {
		tb.Fatalf("the asr worker kept using CPU for 10 s after the cancel")
	}
	return quiet
}

// checkNothingAfterASR checks that the cancelled task left nothing to do
// after asr: no attempt, part or message of translate, tts or mux_video,
// no dead letter, and a timeline that ends with "ended cancelled".
func (s *stack) checkNothingAfterASR(t *testing.T, ctx context.Context, id uuid.UUID) {
	t.Helper()
	later := []string{"translate", "tts", "mux_video"}
	var attempts, parts, messages, deadLetters int
	if err := s.db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = ANY($2)),
		(SELECT count(*) FROM step_parts WHERE task_id = $1 AND step = ANY($2)),
		(SELECT count(*) FROM outbox WHERE routing_key = ANY(SELECT 'task.' || l FROM unnest($2::text[]) l)),
		(SELECT count(*) FROM dead_letters WHERE task_id = $1)`, id, later).Scan(&attempts, &parts, &messages, &deadLetters); err != nil {
		t.Fatal(err)
	}
	if attempts+parts+messages+deadLetters != 0 {
		t.Errorf("after the cancel: %d attempts, %d parts and %d messages in the outbox of %v, %d dead letters; want none",
			attempts, parts, messages, later, deadLetters)
	}
	t.Logf("%s", s.timeline(t, ctx, id))
	evs, err := view.Timeline(ctx, s.db.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Kind != view.EventEnded || last.Status != task.Cancelled {
		t.Errorf("the timeline ends with %s %s, want ended cancelled", last.Kind, last.Status)
	}
}
