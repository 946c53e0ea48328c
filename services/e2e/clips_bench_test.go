package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkShortClips submits many 11 s clips (the jfk fixture as a video;
// BENCH_CLIPS, 30 by default) at once to the five worker processes and
// times them from the first submit to the last task done, against
// scripts/bench-serial.sh on one clip in the same run (BENCH_CLIPS_SERIAL_RUNS
// times before the clips and as many after, 3 by default; the median of
// all, the machine's speed drifting meanwhile): ratio = pipeline ÷ (script × clips ÷ 2),
// the script's time spread over two cores. Goal ≤ 1.0.
//
// It also reports the CPU-seconds each clip cost, by process: each worker
// with its children (ffmpeg, pocketsphinx, apertium, espeak-ng; from
// /proc/PID/stat, the worker's utime+stime+cutime+cstime and its live
// descendants'), the stack's Postgres backends (those of its database),
// and the shared RabbitMQ and MinIO servers (shared with whatever else
// runs on the machine: an upper bound), the `dubctl submit` processes with
// their ffprobe (their rusage), beside the script's CPU per clip (its
// children's rusage). With BENCH_CLIPS_PERF=FILE the worker trees are
// sampled by `perf record` during the run and the CPU and process starts
// are printed by program. The asr worker is built as `make build` builds it
// (PS_LIB, auto by default: its decoders kept loaded where
// libpocketsphinx-dev is installed); PS_LIB=0 builds it with a
// pocketsphinx process per clip, to compare.
func BenchmarkShortClips(b *testing.B) {
	clips := envWhole(b, "BENCH_CLIPS", 30, 1)
	runs := envWhole(b, "BENCH_CLIPS_SERIAL_RUNS", 3, 1)
	s := newStack(b, benchWorkerEnv())
	s.start(b, append(append([]string{}, workers...), helpers...)...)
	ctx := context.Background()
	video := fixtureVideo(b, ctx, "jfk.wav", 0)
	first := clipsSerial(b, ctx, video, runs)
	load := clipsLoad()

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := s.clipsCPU(b, ctx)
		perf := clipsStartPerf(b, s)
		start := time.Now()
		submitted := clipsChildrenCPU(b)
		ids := s.clipsSubmit(b, ctx, video, clips)
		submitted = clipsChildrenCPU(b) - submitted // the dubctl processes, ended and reaped
		s.clipsWait(b, ctx, ids, time.Duration(clips)*time.Minute)
		wall := time.Since(start)
		tools := perf.stop(b)
		used := s.clipsCPU(b, ctx).minus(before)
		used["dubctl"] = submitted
		b.StopTimer()
		// The script again after the pipeline: the machine is shared, and
		// its speed drifts between the two; the goal takes the median of
		// the runs before and after.
		after := clipsSerial(b, ctx, video, runs)
		script, scriptCPU := first.with(after).median()
		goal := script.Seconds() * float64(clips) / 2
		b.ReportMetric(wall.Seconds(), "pipeline-s")
		b.ReportMetric(script.Seconds(), "script-s")
		b.ReportMetric(wall.Seconds()/goal, "ratio")
		b.ReportMetric(used.workers()/float64(clips), "worker-cpu-s/clip")
		var report strings.Builder
		fmt.Fprintf(&report, "%d × 11 s clips at once: pipeline %.2fs (first submit to last done), script %.2fs a clip "+
			"(median of %d runs: %.2fs before the pipeline, %.2fs after), goal %.2fs (script × %d ÷ 2), ratio %.2f (goal ≤ 1.0); "+
			"load before %s, after %s\n",
			clips, wall.Seconds(), script.Seconds(), 2*runs, first.wall(), after.wall(), goal, clips, wall.Seconds()/goal,
			load, clipsLoad())
		report.WriteString(used.table(float64(clips), scriptCPU))
		report.WriteString(tools)
		fmt.Print(report.String()) // not the log, which is cut (see BenchmarkPipeline)
		b.StartTimer()
	}
}

// clipsLoad is the machine's load average, as uptime prints it.
func clipsLoad() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// clipsSerial runs the serial script on video runs times and returns each
// run's wall time and the CPU-seconds of the script's processes (the test
// process's children's rusage: nothing else of the test ends while it
// runs).
func clipsSerial(tb testing.TB, ctx context.Context, video string, runs int) serialRuns {
	tb.Helper()
	var r serialRuns
	for range runs {
		before := clipsChildrenCPU(tb)
		wall, _ := runSerial(tb, ctx, video)
		r.walls = append(r.walls, wall)
		r.cpus = append(r.cpus, clipsChildrenCPU(tb)-before)
	}
	return r
}

// serialRuns are the wall times and CPU-seconds of runs of the script.
type serialRuns struct {
	walls []time.Duration
	cpus  []float64
}

// with is r and o together.
func (r serialRuns) with(o serialRuns) serialRuns {
	return serialRuns{walls: append(slices.Clone(r.walls), o.walls...), cpus: append(slices.Clone(r.cpus), o.cpus...)}
}

// median is the median wall time and the median CPU-seconds of the runs.
func (r serialRuns) median() (time.Duration, float64) {
	walls, cpus := slices.Sorted(slices.Values(r.walls)), slices.Sorted(slices.Values(r.cpus))
	return walls[len(walls)/2], cpus[len(cpus)/2]
}

// wall is the median wall time in seconds.
func (r serialRuns) wall() float64 {
	w, _ := r.median()
	return w.Seconds()
}

// clipsChildrenCPU is the user+system CPU of the test process's ended children.
func clipsChildrenCPU(tb testing.TB) float64 {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// clipsSubmit runs one `dubctl submit` per clip, all at once, and returns
// the tasks.
func (s *stack) clipsSubmit(tb testing.TB, ctx context.Context, video string, n int) []uuid.UUID {
	tb.Helper()
	ids := make([]uuid.UUID, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i], errs[i] = s.clipsSubmitOne(ctx, video) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	return ids
}

// clipsSubmitOne submits video without waiting (stack.dubctl fails the
// test, which only the test's goroutine may do), with dubctl's extra
// flags.
func (s *stack) clipsSubmitOne(ctx context.Context, video string, extra ...string) (uuid.UUID, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "dubctl"), append([]string{"submit", "--input", video,
		"--source", "en", "--target", "es", "--json"}, extra...)...)
	cmd.Dir = os.TempDir()
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return uuid.Nil, fmt.Errorf("dubctl submit: %w\n%s", err, stderr.String())
	}
	var v taskJSON
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		return uuid.Nil, fmt.Errorf("dubctl submit printed no task: %w\n%s", err, stdout.String())
	}
	return v.TaskID, nil
}

// clipsWait polls the tasks' rows until every one is done, and fails when
// one failed or the time is up. A poll every 250 ms (0.2 % of a 2-minute
// run) keeps its own Postgres work out of the backends' CPU it measures.
func (s *stack) clipsWait(tb testing.TB, ctx context.Context, ids []uuid.UUID, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var done, failed int
		err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'done'),
			count(*) FILTER (WHERE status = 'failed') FROM tasks WHERE id = ANY($1)`, ids).Scan(&done, &failed)
		switch {
		case err != nil:
			tb.Fatalf("read the clips' tasks: %v", err)
		case failed > 0:
			tb.Fatalf("%d of %d clips failed", failed, len(ids))
		case done == len(ids):
			return
		case time.Now().After(deadline):
			tb.Fatalf("%d of %d clips done after %s", done, len(ids), timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// clipsUsage is CPU-seconds by process: each worker's tree, Postgres
// backends of the stack's database, and the shared RabbitMQ and MinIO.
type clipsUsage map[string]float64

// clipsShared are the servers whose CPU is read whole: shared with every
// other user of the machine's stack.
var clipsShared = []struct{ name, port string }{{"rabbitmq*", "5672"}, {"minio*", "9000"}}

// clipsCPU reads every process's CPU-seconds so far.
func (s *stack) clipsCPU(tb testing.TB, ctx context.Context) clipsUsage {
	tb.Helper()
	all := clipsProcTable(tb)
	u := clipsUsage{}
	for _, w := range workers {
		u[w] = all.tree(s.procs[w].Cmd.Process.Pid)
	}
	rows, err := s.db.Pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		tb.Fatalf("list Postgres backends: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			tb.Fatal(err)
		}
		u["postgres"] += all[pid].cpu
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	for _, sh := range clipsShared {
		if pid := clipsListener(sh.port); pid > 0 {
			u[sh.name] = all[pid].cpu
		}
	}
	return u
}

func (u clipsUsage) minus(o clipsUsage) clipsUsage {
	out := clipsUsage{}
	for k, v := range u {
		out[k] = v - o[k]
	}
	return out
}

// workers is the worker trees' CPU-seconds.
func (u clipsUsage) workers() float64 {
	var n float64
	for _, w := range workers {
		n += u[w]
	}
	return n
}

// table prints the CPU-seconds per clip by process beside the script's.
func (u clipsUsage) table(clips, script float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CPU-s per clip (worker = the Go process + its children)\n")
	for _, w := range workers {
		fmt.Fprintf(&b, "  %-16s %7.3f\n", w, u[w]/clips)
	}
	fmt.Fprintf(&b, "  %-16s %7.3f   (script: %.3f, ratio %.2f)\n", "workers", u.workers()/clips, script, u.workers()/clips/script)
	fmt.Fprintf(&b, "  %-16s %7.3f   (backends of the stack's database)\n", "postgres", u["postgres"]/clips)
	if v, ok := u["dubctl"]; ok {
		fmt.Fprintf(&b, "  %-16s %7.3f   (the submitting processes with their ffprobe: door check, upload, publish)\n", "dubctl", v/clips)
	}
	for _, sh := range clipsShared {
		if v, ok := u[sh.name]; ok {
			fmt.Fprintf(&b, "  %-16s %7.3f   (whole server, shared with the machine)\n", sh.name, v/clips)
		}
	}
	return b.String()
}

// clipsProc is one process's parent and CPU-seconds (its own and its ended
// children's).
type clipsProc struct {
	ppid int
	cpu  float64
}

type clipsProcs map[int]clipsProc

// clipsProcTable reads /proc/*/stat.
func clipsProcTable(tb testing.TB) clipsProcs {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	out := clipsProcs{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		// After "(comm) ": state ppid ... utime(14) stime cutime cstime.
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
		if len(f) < 15 {
			continue
		}
		info := clipsProc{}
		info.ppid, _ = strconv.Atoi(f[1])
		for _, x := range f[11:15] {
			t, _ := strconv.ParseFloat(x, 64)
			info.cpu += t / clipsClockTicks
		}
		out[pid] = info
	}
	return out
}

// clipsClockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clipsClockTicks = 100

// tree is the CPU-seconds of pid and its live descendants: an ended child's
// time is in its parent's cutime once reaped.
func (p clipsProcs) tree(pid int) float64 {
	n := p[pid].cpu
	for child, info := range p {
		if info.ppid == pid && child != pid {
			n += p.tree(child)
		}
	}
	return n
}

// clipsListener is the process listening on the TCP port, 0 when none is found.
func clipsListener(port string) int {
	out, err := exec.Command("ss", "-Hltnp", "sport = :"+port).Output()
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(out), "pid=")
	if !ok {
		return 0
	}
	end := strings.IndexAny(rest, ",)")
	if end < 0 {
		return 0
	}
	pid, _ := strconv.Atoi(rest[:end])
	return pid
}

// clipsPerf is a `perf record` of the worker trees, nil when not asked for.
type clipsPerf struct {
	cmd  *exec.Cmd
	file string
}

// clipsPerfPeriod is the CPU time between two samples.
const clipsPerfPeriod = 4 * time.Millisecond

// clipsStartPerf starts perf on the workers (and the processes they start
// meanwhile) when BENCH_CLIPS_PERF names its data file.
func clipsStartPerf(tb testing.TB, s *stack) *clipsPerf {
	tb.Helper()
	file := os.Getenv("BENCH_CLIPS_PERF")
	if file == "" {
		return nil
	}
	var pids []string
	for _, w := range workers {
		pids = append(pids, strconv.Itoa(s.procs[w].Cmd.Process.Pid))
	}
	cmd := exec.Command("perf", "record", "-q", "-g", "-e", fmt.Sprintf("cpu-clock/period=%d/", clipsPerfPeriod.Nanoseconds()),
		"-e", "sched:sched_process_exec", "-p", strings.Join(pids, ","), "-o", file)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start perf: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // attached
	return &clipsPerf{cmd: cmd, file: file}
}

// stop ends perf and returns the CPU-seconds and the starts per program.
func (p *clipsPerf) stop(tb testing.TB) string {
	tb.Helper()
	if p == nil {
		return ""
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	_ = p.cmd.Wait()
	out, err := exec.Command("perf", "script", "-i", p.file, "-F", "comm,event").Output()
	if err != nil {
		tb.Fatalf("perf script: %v", err)
	}
	cpu, starts := map[string]float64{}, map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		comm, event := strings.Join(f[:len(f)-1], " "), f[len(f)-1]
		switch {
		case strings.HasPrefix(event, "cpu-clock"):
			cpu[comm] += clipsPerfPeriod.Seconds()
		case strings.HasPrefix(event, "sched:sched_process_exec"):
			starts[comm]++
		}
	}
	names := make([]string, 0, len(cpu))
	for n := range cpu {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return cpu[names[i]] > cpu[names[j]] })
	var b strings.Builder
	fmt.Fprintf(&b, "perf (%s): CPU-s and process starts by program, all clips\n", p.file)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-18s %8.2f s %6d starts\n", n, cpu[n], starts[n])
	}
	return b.String()
}
