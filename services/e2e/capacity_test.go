package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/capacity"
	"github.com/google/uuid"
)

// TestCapacity is `make capacity`: it dubs CAPACITY_CLIPS copies of the
// 44 s clip and a CAPACITY_LONG_MINUTES video, all submitted at once, on
// the five worker processes, measures per step the CPU time of the worker
// and its children and the peak PSS of the tree, the Postgres statements
// and broker messages per task and the seconds per message, plans the
// deployment for HOURS_PER_DAY with pkg/capacity, prints the table and
// writes measured figures and plan to CAPACITY_OUT (deploy/capacity.json
// by default). It predicts the run's wall time from its CPU time and
// prints predicted vs measured.
func TestCapacity(t *testing.T) {
	if os.Getenv("DUBFLOW_CAPACITY") == "" {
		t.Skip("a measured workload of minutes: run by `make capacity` (DUBFLOW_CAPACITY=1)")
	}
	clips, long := envWhole(t, "CAPACITY_CLIPS", 8, 1), envWhole(t, "CAPACITY_LONG_MINUTES", 5, 2)
	ctx := context.Background()
	clip := fixtureVideo(t, ctx, "two_cities.wav", 0)
	longVideo := fixtureVideo(t, ctx, "two_cities.wav", time.Duration(long)*time.Minute)
	clipMinutes := videoMinutes(t, ctx, clip)
	s := newStack(t, benchWorkerEnv())
	s.start(t, append(append([]string{}, workers...), helpers...)...)

	m, err := s.measure(t, ctx, append(repeat(clip, clips), longVideo), float64(clips)*clipMinutes+float64(long))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := capacity.Model(m, defaultTarget(t))
	if err != nil {
		t.Fatal(err)
	}
	pred, err := capacity.Predict(m)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(capacityReport(m, plan, pred))
	writeCapacity(t, m, plan, pred)
}

// defaultTarget is the production target: HOURS_PER_DAY (1000) of video a
// day, one core per replica used at 70 %, a backlog drained in 2 minutes,
// memory requested at 1.5 × the measured peak.
func defaultTarget(tb testing.TB) capacity.Target {
	return capacity.Target{HoursPerDay: float64(envWhole(tb, "HOURS_PER_DAY", 1000, 1)), CoresPerReplica: 1,
		Utilisation: 0.7, DrainSeconds: 120, MemoryHeadroom: 1.5}
}

// measure dubs the videos at once and returns what each step cost.
func (s *stack) measure(tb testing.TB, ctx context.Context, videos []string, minutes float64) (capacity.Measured, error) {
	pids := map[string]int{}
	for _, w := range workers {
		pids[w] = s.procs[w].Cmd.Process.Pid
	}
	before, cpu0, busy0 := s.costs(tb), cpuTimes(tb, pids), machineBusy(tb)
	sampler := sampleTrees(pids, 50*time.Millisecond)
	start := time.Now()
	ids := make([]uuid.UUID, len(videos))
	for i, v := range videos {
		ids[i] = s.submit(tb, ctx, v)
	}
	for _, id := range ids {
		if v, code := s.waitTask(tb, ctx, id, "", 2*time.Hour); code != 0 || v.Status != "done" {
			tb.Fatalf("task %s: exit %d, %s: %s", id, code, v.Status, v.Error)
		}
	}
	wall := time.Since(start).Seconds()
	peaks := sampler.stop()
	cpu1, busy1 := cpuTimes(tb, pids), machineBusy(tb)
	costs := s.costsSince(tb, ctx, before)
	perMsg := s.secondsPerMessage(tb, ctx, ids)
	m := capacity.Measured{Tasks: len(videos), VideoMinutes: minutes, WallSeconds: wall, Cores: runtime.NumCPU()}
	var ours float64
	for _, w := range workers {
		c, n := costs[w], float64(len(videos))
		used := cpu1[w] - cpu0[w]
		ours += used
		m.Steps = append(m.Steps, capacity.Step{Name: w, CPUSecondsPerMinute: used / minutes,
			PeakMB: mb(peaks[w].pss), StatementsPerTask: c.Statements / n, BrokerPerTask: c.Broker() / n,
			SecondsPerMessage: perMsg[w]})
	}
	m.OtherCores = max(0, (busy1-busy0-ours)/wall)
	return m, m.Validate()
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// cpuTimes is, per worker, the CPU seconds of the process, of the
// children it has waited for and of its live descendants (a resident
// Apertium pipeline or decoder is never reaped while the worker runs, so
// its time is in no cutime): clipsProcTable's tree.
func cpuTimes(tb testing.TB, pids map[string]int) map[string]float64 {
	tb.Helper()
	procs := clipsProcTable(tb)
	out := map[string]float64{}
	for w, pid := range pids {
		if _, ok := procs[pid]; !ok {
			tb.Fatalf("%s: pid %d is gone", w, pid)
		}
		out[w] = procs.tree(pid)
	}
	return out
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// machineBusy is the CPU seconds every core of the machine has been busy
// (not idle, not waiting for I/O) since boot, from /proc/stat.
func machineBusy(tb testing.TB) float64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var busy float64
	for i, v := range strings.Fields(line)[1:] {
		ticks, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest is counted in user
			busy += ticks
		}
	}
	return busy / clockTicks
}

// secondsPerMessage is each step's mean attempt time over the tasks.
func (s *stack) secondsPerMessage(tb testing.TB, ctx context.Context, ids []uuid.UUID) map[string]float64 {
	tb.Helper()
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	rows, err := s.db.Pool.Query(ctx, `SELECT step, avg(extract(epoch FROM finished_at - started_at))::float8
		FROM task_steps WHERE task_id = ANY($1::uuid[]) AND finished_at IS NOT NULL GROUP BY step`, strs)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var step string
		var secs float64
		if err := rows.Scan(&step, &secs); err != nil {
			tb.Fatal(err)
		}
		out[step] = secs
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// videoMinutes is the length of a video by ffprobe.
func videoMinutes(tb testing.TB, ctx context.Context, path string) float64 {
	tb.Helper()
	out, err := exec.CommandContext(ctx, "ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path).Output()
	if err != nil {
		tb.Fatalf("ffprobe %s: %v", path, err)
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		tb.Fatalf("ffprobe %s: duration %q", path, out)
	}
	return secs / 60
}
