package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkProjectsTakeTurns measures fair turns between projects (issue
// 51): project B's 11 s clip (the jfk fixture as a video) is dubbed alone,
// then again submitted one second after project A submitted 20 of them
// (BENCH_FAIR_CLIPS) at once; both times from B's submit to its task done.
// Each project's tasks share its places in every step's window (its
// fair_scope), so B's parts take turns with A's instead of waiting behind
// them. It reports B's time beside A's clips ÷ B's time alone, in the
// same run (goal ≤ 1.5), and A's clips' time.
func BenchmarkProjectsTakeTurns(b *testing.B) {
	clips := envWhole(b, "BENCH_FAIR_CLIPS", 20, 1)
	s := newStack(b, benchWorkerEnv())
	s.start(b, append(append([]string{}, workers...), helpers...)...)
	ctx := context.Background()
	video := fixtureVideo(b, ctx, "jfk.wav", 0)
	for _, p := range []string{"proj-a", "proj-b"} {
		if _, stderr, code := s.dubctl(b, ctx, "project", "create", p); code != 0 {
			b.Fatalf("project create %s: %s", p, stderr)
		}
	}
	b.ResetTimer()
	var solo, beside, batch time.Duration
	for i := 0; i < b.N; i++ {
		solo += s.timeClip(b, ctx, video, "proj-b")
		var wg sync.WaitGroup
		ids := make([]uuid.UUID, clips)
		errs := make([]error, clips)
		start := time.Now()
		for j := range clips {
			wg.Go(func() { ids[j], errs[j] = s.clipsSubmitOne(ctx, video, "--project", "proj-a") })
		}
		time.Sleep(time.Second) // B submits a second after A
		d, id := s.timeClipID(b, ctx, video, "proj-b")
		beside += d
		b.Log("\nB's clip beside A's:\n" + s.timeline(b, ctx, id))
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		s.clipsWait(b, ctx, ids, time.Duration(clips)*time.Minute)
		batch += time.Since(start)
	}
	b.StopTimer()
	n := float64(b.N)
	sSolo, sBeside, sBatch := solo.Seconds()/n, beside.Seconds()/n, batch.Seconds()/n
	b.ReportMetric(sSolo, "b-solo-s")
	b.ReportMetric(sBeside, "b-beside-s")
	b.ReportMetric(sBeside/sSolo, "b-beside/solo")
	fmt.Printf("project B's 11 s clip: alone %.2fs, submitted 1 s after project A's %d clips %.2fs, ratio %.2f (goal ≤ 1.5); "+
		"A's %d clips: %.2fs from the first submit to the last done\n", sSolo, clips, sBeside, sBeside/sSolo, clips, sBatch)
}

// timeClip submits video to project and returns the time from the submit
// to the task done.
func (s *stack) timeClip(tb testing.TB, ctx context.Context, video, project string) time.Duration {
	tb.Helper()
	d, _ := s.timeClipID(tb, ctx, video, project)
	return d
}

// timeClipID is timeClip with the task's id.
func (s *stack) timeClipID(tb testing.TB, ctx context.Context, video, project string) (time.Duration, uuid.UUID) {
	tb.Helper()
	start := time.Now()
	id, err := s.clipsSubmitOne(ctx, video, "--project", project)
	if err != nil {
		tb.Fatal(err)
	}
	s.clipsWait(tb, ctx, []uuid.UUID{id}, 10*time.Minute)
	return time.Since(start), id
}
