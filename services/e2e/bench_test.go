package e2e

import (
	"bufio"
	"context"
	"fmt"
	"github.com/dubflow/dubflow/pkg/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// BenchmarkPipeline dubs the 44 s two_cities fixture (made into a video on
// the spot) through the five worker processes, from `dubctl submit` to the
// task being done, and runs scripts/bench-serial.sh — the same tools one
// after another in one shell — on the same input in the same run. It
// reports both wall times, their ratio and each step's time from
// task_steps.
func BenchmarkPipeline(b *testing.B) {
	s := newStack(b, benchWorkerEnv())
	s.start(b, append(append([]string{}, workers...), helpers...)...)
	ctx := context.Background()
	video := fixtureVideo(b, ctx, "two_cities.wav", 0)
	serial, stages := runSerial(b, ctx, video)

	b.ResetTimer()
	var total time.Duration
	steps := map[string]time.Duration{}
	for i := 0; i < b.N; i++ {
		start := time.Now()
		v := s.dub(b, ctx, video, 30*time.Minute)
		total += time.Since(start)
		for step, d := range s.stepTimes(b, ctx, v.TaskID) {
			steps[step] += d
		}
		b.Log("\n" + s.timeline(b, ctx, v.TaskID))
	}
	b.StopTimer()
	pipeline := total.Seconds() / float64(b.N)
	b.ReportMetric(pipeline, "pipeline-s")
	b.ReportMetric(serial.Seconds(), "serial-s")
	b.ReportMetric(pipeline/serial.Seconds(), "pipeline/serial")
	var report strings.Builder
	fmt.Fprintf(&report, "44 s clip: pipeline %.2fs (submit to done), serial %.2fs, ratio %.2f (goal ≤ 0.65)\n",
		pipeline, serial.Seconds(), pipeline/serial.Seconds())
	fmt.Fprintf(&report, "%-14s %10s %10s\n", "step", "pipeline", "serial")
	for _, step := range workers {
		d := steps[step].Seconds() / float64(b.N)
		b.ReportMetric(d, step+"-s")
		fmt.Fprintf(&report, "%-14s %9.2fs %9.2fs\n", step, d, stages[step].Seconds())
	}
	// On standard output: a benchmark's log is cut to its first lines
	// (the timeline), and this is what `make bench` is run for.
	fmt.Print(report.String())
}

// dub submits video with dubctl, waits for it and fails unless it is done.
func (s *stack) dub(tb testing.TB, ctx context.Context, video string, timeout time.Duration) taskJSON {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "dubbed.mp4")
	stdout, stderr, code := s.dubctl(tb, ctx, "submit", "--input", video, "--source", "en", "--target", "es",
		"--wait", "--json", "--timeout", timeout.String(), "--output", out)
	v := decodeTask(tb, stdout, stderr)
	if code != 0 || v.Status != "done" {
		tb.Fatalf("dub %s: exit %d, task %s %s: %s\n%s", video, code, v.TaskID, v.Status, v.Error, stderr)
	}
	return v
}

// stepTimes is each step's time in task_steps: from its first attempt's
// start to its last success's end (for translate, across all its parts).
func (s *stack) stepTimes(tb testing.TB, ctx context.Context, id uuid.UUID) map[string]time.Duration {
	tb.Helper()
	rows, err := s.db.Pool.Query(ctx, `SELECT step, extract(epoch FROM max(finished_at) - min(started_at))
		FROM task_steps WHERE task_id = $1 GROUP BY step`, id)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string]time.Duration{}
	for rows.Next() {
		var step string
		var secs float64
		if err := rows.Scan(&step, &secs); err != nil {
			tb.Fatal(err)
		}
		out[step] = time.Duration(secs * float64(time.Second))
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// timeline lists every attempt of every step and part of task id, its start
// and end in seconds after the task was created and the gap since the
// latest end before it (queue wait, claim and hand-off), to see where a
// dub's wall time goes.
func (s *stack) timeline(tb testing.TB, ctx context.Context, id uuid.UUID) string {
	tb.Helper()
	rows, err := s.db.Pool.Query(ctx, `SELECT ts.step, ts.part, ts.attempt, ts.status,
		extract(epoch FROM ts.started_at - t.created_at)::float8,
		extract(epoch FROM coalesce(ts.finished_at, ts.started_at) - t.created_at)::float8
		FROM task_steps ts JOIN tasks t ON t.id = ts.task_id
		WHERE ts.task_id = $1 ORDER BY ts.started_at`, id)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out strings.Builder
	fmt.Fprintf(&out, "timeline of task %s (s after created)\n%-12s %-14s %3s %-10s %7s %7s %7s\n",
		id, "step", "part", "try", "status", "start", "end", "run")
	for rows.Next() {
		var step, part, status string
		var attempt int
		var start, end float64
		if err := rows.Scan(&step, &part, &attempt, &status, &start, &end); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&out, "%-12s %-14s %3d %-10s %7.2f %7.2f %7.2f\n", step, part, attempt, status, start, end, end-start)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out.String()
}

// fixtureVideo makes an MP4 of a still test picture over a speech fixture,
// the fixture looped to length when length > 0.
func fixtureVideo(tb testing.TB, ctx context.Context, name string, length time.Duration) string {
	tb.Helper()
	wav := fixture(tb, name)
	out := filepath.Join(tb.TempDir(), strings.TrimSuffix(name, filepath.Ext(name))+".mp4")
	args := []string{"-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10"}
	if length > 0 {
		args = append(args, "-stream_loop", "-1", "-i", wav, "-t", fmt.Sprintf("%.0f", length.Seconds()))
	} else {
		args = append(args, "-i", wav, "-shortest")
	}
	args = append(args, "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "veryfast",
		"-tune", "stillimage", "-pix_fmt", "yuv420p", "-g", "50", "-c:a", "aac", "-b:a", "96k",
		"-movflags", "+faststart", out)
	if o, err := exec.CommandContext(ctx, "ffmpeg", args...).CombinedOutput(); err != nil {
		tb.Fatalf("make a video of %s: %v\n%s", name, err, o)
	}
	return out
}

// runSerial runs scripts/bench-serial.sh on video and returns its total and
// per-stage times.
func runSerial(tb testing.TB, ctx context.Context, video string) (time.Duration, map[string]time.Duration) {
	tb.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "bench-serial.sh"), video)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("bench-serial.sh: %v\n%s", err, out)
	}
	stages := map[string]time.Duration{}
	var total time.Duration
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		fields := map[string]string{}
		for _, f := range strings.Fields(sc.Text()) {
			if k, v, ok := strings.Cut(f, "="); ok {
				fields[k] = v
			}
		}
		if v, ok := fields["serial_seconds"]; ok {
			total = seconds(tb, v)
		}
		if st, ok := fields["stage"]; ok {
			stages[st] = seconds(tb, fields["seconds"])
		}
	}
	if total == 0 || len(stages) != len(wire.Pipeline) {
		tb.Fatalf("bench-serial.sh printed no total or not every stage:\n%s", out)
	}
	return total, stages
}

func seconds(tb testing.TB, s string) time.Duration {
	tb.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		tb.Fatalf("parse seconds %q: %v", s, err)
	}
	return time.Duration(f * float64(time.Second))
}
