package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// benchWorkerEnv sizes the workers for the benchmarks as the README's
// sizing advice says, unless the environment says otherwise:
// WORKER_CONCURRENCY is the cores plus one, so that with a long video's
// ASR_CONCURRENCY (2) chunks being transcribed another task's chunk still
// finds a free consumer at once instead of waiting behind them.
func benchWorkerEnv() map[string]string {
	if os.Getenv("WORKER_CONCURRENCY") != "" {
		return nil
	}
	return map[string]string{"WORKER_CONCURRENCY": strconv.Itoa(runtime.NumCPU() + 1)}
}

// BenchmarkLongAndFair dubs a long video (10 minutes by default,
// BENCH_LONG_MINUTES) built from the two_cities fixture and, in the same
// run, the 11 s jfk clip twice: once on the idle stack, and once submitted
// while the long video is being transcribed. It runs
// scripts/bench-serial.sh on the long video as the baseline and reports
// pipeline ÷ serial for the long video, and the short clip's time beside
// the long video ÷ its idle time (fairness: goal ≤ 1.5).
//
// The long video's pipeline time includes the short clip's work, which
// shares the machine with it: the ratio is, if anything, pessimistic.
func BenchmarkLongAndFair(b *testing.B) {
	minutes := envWhole(b, "BENCH_LONG_MINUTES", 10, 2)
	s := newStack(b, benchWorkerEnv())
	s.start(b, append(append([]string{}, workers...), helpers...)...)
	ctx := context.Background()
	long := fixtureVideo(b, ctx, "two_cities.wav", time.Duration(minutes)*time.Minute)
	short := fixtureVideo(b, ctx, "jfk.wav", 0)
	serial, stages := runSerial(b, ctx, long)

	b.ResetTimer()
	var idle, beside, pipeline, firstMinute time.Duration
	minLead := time.Duration(1 << 62)
	steps := map[string]time.Duration{}
	for i := 0; i < b.N; i++ {
		start := time.Now()
		s.dub(b, ctx, short, 10*time.Minute)
		idle += time.Since(start)

		start = time.Now()
		id := s.submit(b, ctx, long)
		s.waitChunksRunning(b, ctx, id, 10*time.Minute)
		shortStart := time.Now()
		s.dub(b, ctx, short, 30*time.Minute)
		beside += time.Since(shortStart)
		v, code := s.waitTask(b, ctx, id, "", time.Duration(10+3*minutes)*time.Minute)
		if code != 0 || v.Status != "done" {
			b.Fatalf("long video: exit %d, task %s %s: %s", code, v.TaskID, v.Status, v.Error)
		}
		pipeline += time.Since(start)
		first, lead := s.streamTimes(b, ctx, id, start)
		firstMinute += first
		minLead = min(minLead, lead)
		for step, d := range s.stepTimes(b, ctx, id) {
			steps[step] += d
		}
		b.Log("\n" + s.timeline(b, ctx, id))
		b.Log(s.logLine(b, "mux_video", id, "video dubbed"))
		b.Log(s.logLine(b, "mux_video", id, "stream batch made"))
	}
	b.StopTimer()
	n := float64(b.N)
	p, sIdle, sBeside := pipeline.Seconds()/n, idle.Seconds()/n, beside.Seconds()/n
	b.ReportMetric(p, "long-pipeline-s")
	b.ReportMetric(serial.Seconds(), "long-serial-s")
	b.ReportMetric(p/serial.Seconds(), "long-pipeline/serial")
	b.ReportMetric(sBeside/sIdle, "short-beside/idle")
	fm := firstMinute.Seconds() / n
	b.ReportMetric(fm/serial.Seconds(), "first-minute/serial")
	b.ReportMetric(minLead.Seconds(), "stream-min-lead-s")
	var report strings.Builder
	fmt.Fprintf(&report, "%d-minute video: pipeline %.2fs (submit to done), serial %.2fs, ratio %.2f (goal ≤ 0.55)\n",
		minutes, p, serial.Seconds(), p/serial.Seconds())
	fmt.Fprintf(&report, "11 s clip: idle %.2fs, submitted while the %d-minute video was transcribed %.2fs, ratio %.2f (goal ≤ 1.5)\n",
		sIdle, minutes, sBeside, sBeside/sIdle)
	fmt.Fprintf(&report, "growing stream: the first 60 s playable %.2fs after submit, %.2f of the serial total (goal ≤ 0.15); "+
		"a player started then is never caught up: smallest lead of a batch over the play head %.2fs\n",
		fm, fm/serial.Seconds(), minLead.Seconds())
	fmt.Fprintf(&report, "%-14s %10s %10s\n", "step", "pipeline", "serial")
	for _, step := range workers {
		fmt.Fprintf(&report, "%-14s %9.2fs %9.2fs\n", step, steps[step].Seconds()/n, stages[step].Seconds())
	}
	fmt.Print(report.String()) // not the log, which is cut (see BenchmarkPipeline)
}

// envWhole is the environment variable key as a whole number of at least
// least, def when it is unset (a benchmark's or a measured run's setting).
func envWhole(tb testing.TB, key string, def, least int) int {
	tb.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		tb.Fatalf("%s=%q: want a whole number, at least %d", key, v, least)
	}
	return n
}

// submit submits video with dubctl without waiting and returns its task.
func (s *stack) submit(tb testing.TB, ctx context.Context, video string) uuid.UUID {
	tb.Helper()
	stdout, stderr, code := s.dubctl(tb, ctx, "submit", "--input", video, "--source", "en", "--target", "es", "--json")
	v := decodeTask(tb, stdout, stderr)
	if code != 0 {
		tb.Fatalf("submit %s: exit %d: %s", video, code, stderr)
	}
	return v.TaskID
}

// waitChunksRunning waits until a chunk of the task's audio is being
// transcribed.
func (s *stack) waitChunksRunning(tb testing.TB, ctx context.Context, id uuid.UUID, timeout time.Duration) {
	tb.Helper()
	testenv.EventuallyWithin(tb, timeout, "a chunk of "+id.String()+" to be transcribed", func() bool {
		var n int
		err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps
			WHERE task_id = $1 AND step = 'asr' AND part LIKE 'chunk-%'`, id).Scan(&n)
		return err == nil && n > 0
	})
}

// logLine returns the line of service's log that mentions task id and
// contains text (the last one), or says there is none.
func (s *stack) logLine(tb testing.TB, service string, id uuid.UUID, text string) string {
	tb.Helper()
	raw, err := os.ReadFile(s.procs[service].Log)
	if err != nil {
		return fmt.Sprintf("%s log: %v", service, err)
	}
	found := fmt.Sprintf("no %q line for task %s in the %s log", text, id, service)
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, id.String()) && strings.Contains(line, text) {
			found = service + ": " + line
		}
	}
	return found
}

// streamTimes reads when the task's stream batches were made: how long
// after start the first 60 s of the stream (all of it, when shorter) could
// play, and the smallest lead of a batch over a player that started then
// (its start on the timeline after the player's start, less when it was
// made).
func (s *stack) streamTimes(tb testing.TB, ctx context.Context, id uuid.UUID, start time.Time) (time.Duration, time.Duration) {
	tb.Helper()
	rows, err := s.db.Pool.Query(ctx, `SELECT from_ms, to_ms, made_at FROM stream_batches WHERE task_id = $1 ORDER BY from_ms`, id)
	if err != nil {
		tb.Fatal(err)
	}
	type batch struct {
		from, to int
		made     time.Time
	}
	var batches []batch
	for rows.Next() {
		var b batch
		if err := rows.Scan(&b.from, &b.to, &b.made); err != nil {
			tb.Fatal(err)
		}
		batches = append(batches, b)
	}
	if err := rows.Err(); err != nil || len(batches) == 0 {
		tb.Fatalf("stream batches of %s: %d, %v", id, len(batches), err)
	}
	var ready time.Time
	for _, b := range batches {
		if ready.IsZero() || b.made.After(ready) {
			ready = b.made
		}
		if b.to >= 60_000 {
			break
		}
	}
	// The batches there when the player starts have all the lead they
	// need; the smallest lead is over those made after (none: the whole
	// stream was there, its lead is what the player had yet to play).
	lead := time.Duration(batches[len(batches)-1].to) * time.Millisecond
	for _, b := range batches {
		if b.made.After(ready) {
			need := ready.Add(time.Duration(b.from) * time.Millisecond)
			lead = min(lead, need.Sub(b.made))
		}
	}
	return ready.Sub(start), lead
}
