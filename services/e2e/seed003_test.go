package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/pool/pooltest"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// Seed 003's targets (its 关键成功指标 and 技术目标), as dubflow reads them:
// a subtask is a step part, a task's wait is a part's queue wait.
const (
	seed003PartsPerHour = 100000
	seed003WaitSeconds  = 30
	seed003APIMillis    = 500
	seed003Availability = 0.999
	seed003Completion   = 0.99
)

// seed003Tasks is how many tasks TestSeed003 dubs: SEED003_TASKS (make
// seed003-bench: 20), else 4.
func seed003Tasks(tb testing.TB) int {
	v := os.Getenv("SEED003_TASKS")
	if v == "" {
		return 4
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("SEED003_TASKS=%q: want a whole number, at least 1", v)
	}
	return n
}

// TestSeed003 measures seed 003's targets on this machine (make
// seed003-bench; skipped unless DUBFLOW_SEED003 is set): SEED003_TASKS
// tasks through the five real workers whose asr, translate and tts call
// engines that answer at once (pkg/pool/pooltest's fakes, speaking the
// remote engines' real protocols), so that what is measured is the chain
// — ffmpeg's extract and mux, the runtime, Postgres, RabbitMQ, MinIO —
// and not a model. Beside it, in the same run: the raw relay (plain AMQP
// publish and consume of as many messages, no work), the queue waits
// (dubflow_step_wait_seconds from the workers, and task_steps), the
// console API's p99 while the chain runs, and how completion and
// availability are computed from the chaos run. Each figure is printed
// beside seed 003's target.
func TestSeed003(t *testing.T) {
	if os.Getenv("DUBFLOW_SEED003") == "" {
		t.Skip("make seed003-bench runs it (DUBFLOW_SEED003=1)")
	}
	n := seed003Tasks(t)
	env, token := seed003Env(t)
	s := newStack(t, env)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	consoleDir, err := testenv.SharedBinaries("console")
	if err != nil {
		t.Fatalf("build the console: %v", err)
	}
	s.procs["console"] = &proc{testenv.StartProc(t, consoleDir, "console", s.env)}
	t.Cleanup(func() { s.procs["console"].Stop(t, true) })
	s.procs["console"].WaitReady(t)

	ctx, cancel := context.WithTimeout(context.Background(), testenv.Within(t, 60*time.Minute))
	defer cancel()
	video := filepath.Join(t.TempDir(), "clip.mp4")
	if err := media.MakeSampleVideo(ctx, sampleText, video, media.SampleOptions{Lead: sampleLead}); err != nil {
		t.Fatal(err)
	}
	load := startAPILoad(ctx, "http://"+s.env["CONSOLE_HTTP_ADDR"], token, 4)
	start := time.Now()
	ids := s.clipsSubmit(t, ctx, video, n)
	load.setTasks(ids)
	s.clipsWait(t, ctx, ids, testenv.Within(t, 50*time.Minute))
	elapsed := time.Since(start)
	api := load.stop()
	parts := s.seed003Parts(t, ctx, ids)
	hops, relay := seed003Relay(t, ctx, parts)
	waits := s.seed003Waits(t)
	dbP50, dbP95 := s.seed003DBWaits(t, ctx, ids)
	fmt.Print(seed003Report(seed003Figures{tasks: n, parts: parts, elapsed: elapsed, hops: hops, relay: relay, waits: waits,
		dbP50: dbP50, dbP95: dbP95, api: api}))
	if waits.count == 0 || api.count() == 0 {
		t.Errorf("measured %v waits and %d API calls: the figures miss their source", waits.count, api.count())
	}
}

// seed003Env is the workers' and the console's environment: each speech
// step on a fake engine that answers at once, and the console's address
// and token. It returns the token.
func seed003Env(t *testing.T) (map[string]string, string) {
	token := "seed003-" + uuid.NewString()
	env := map[string]string{"DUBFLOW_API_TOKEN": token, "CONSOLE_HTTP_ADDR": testenv.FreeAddr(t)}
	for step, url := range map[string]func(*pooltest.Fake) string{
		"ASR": (*pooltest.Fake).Root, "TRANSLATE": (*pooltest.Fake).URL, "TTS": (*pooltest.Fake).Root,
	} {
		fake := pooltest.New(t, pooltest.Serve)
		env[step+"_ENGINE"], env[step+"_BASE_URL"], env[step+"_API_KEY"] = speech.EngineOpenAI, url(fake), pooltest.Key
	}
	return env, token
}

// seed003Parts counts the step parts the tasks succeeded (seed 003's
// subtasks).
func (s *stack) seed003Parts(tb testing.TB, ctx context.Context, ids []uuid.UUID) int {
	tb.Helper()
	var n int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(DISTINCT (task_id, step, part)) FROM task_steps
		WHERE task_id = ANY($1) AND status = 'succeeded'`, ids).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// seed003Relay relays as many messages as the chain's parts (at least
// 1000, for a stable figure) through plain amqp091-go (publish with
// confirm, consume, ack; no work) on a fresh virtual host of the same
// broker, and returns how many and how long it took.
func seed003Relay(tb testing.TB, ctx context.Context, parts int) (int, time.Duration) {
	tb.Helper()
	hops := max(parts, 1000)
	elapsed, err := brokertest.RawRelay(ctx, testenv.AMQP(tb), hops, brokertest.RelayOptions{Prefetch: 32, Concurrency: 8})
	if err != nil {
		tb.Fatal(err)
	}
	return hops, elapsed
}

// waitHistogram is dubflow_step_wait_seconds summed over the workers,
// steps and projects: cumulative counts by upper bound.
type waitHistogram struct {
	buckets map[float64]float64
	count   float64
}

// seed003Waits scrapes every worker's dubflow_step_wait_seconds.
func (s *stack) seed003Waits(tb testing.TB) waitHistogram {
	tb.Helper()
	h := waitHistogram{buckets: map[float64]float64{}}
	for _, w := range workers {
		for _, smp := range scrape(tb, s.procs[w].Addr) {
			switch smp.name {
			case "dubflow_step_wait_seconds_bucket":
				le, err := strconv.ParseFloat(smp.labels["le"], 64)
				if err != nil {
					le = math.Inf(1)
				}
				h.buckets[le] += smp.value
			case "dubflow_step_wait_seconds_count":
				h.count += smp.value
			}
		}
	}
	return h
}

// quantile interpolates within the bucket holding the q-quantile, as
// Prometheus's histogram_quantile does.
func (h waitHistogram) quantile(q float64) float64 {
	bounds := slices.Sorted(func(yield func(float64) bool) {
		for b := range h.buckets {
			if !yield(b) {
				return
			}
		}
	})
	rank, lower, below := q*h.count, 0.0, 0.0
	for _, b := range bounds {
		c := h.buckets[b]
		if c >= rank {
			if math.IsInf(b, 1) || c == below {
				return lower
			}
			return lower + (b-lower)*(rank-below)/(c-below)
		}
		lower, below = b, c
	}
	return lower
}

// seed003DBWaits reads the parts' queue waits' p50 and p95 from
// task_steps (queue_wait_ms), seconds.
func (s *stack) seed003DBWaits(tb testing.TB, ctx context.Context, ids []uuid.UUID) (float64, float64) {
	tb.Helper()
	var p50, p95 *float64
	if err := s.db.Pool.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY queue_wait_ms) / 1000,
		percentile_cont(0.95) WITHIN GROUP (ORDER BY queue_wait_ms) / 1000
		FROM task_steps WHERE task_id = ANY($1) AND queue_wait_ms IS NOT NULL`, ids).Scan(&p50, &p95); err != nil {
		tb.Fatal(err)
	}
	if p50 == nil || p95 == nil {
		return math.NaN(), math.NaN()
	}
	return *p50, *p95
}

// apiLoad is clients calling the console's API in a loop while the chain
// runs: the task list, the health report, and each task's detail and
// realtime status.
type apiLoad struct {
	mu      sync.Mutex
	tasks   []uuid.UUID
	millis  []float64
	errors  int
	stopped chan struct{}
	wg      sync.WaitGroup
}

// startAPILoad starts clients callers of base's API with token.
func startAPILoad(ctx context.Context, base, token string, clients int) *apiLoad {
	l := &apiLoad{stopped: make(chan struct{})}
	for c := range clients {
		l.wg.Go(func() { l.client(ctx, base, token, c) })
	}
	return l
}

func (l *apiLoad) setTasks(ids []uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tasks = ids
}

// client calls the routes in turn until the load stops.
func (l *apiLoad) client(ctx context.Context, base, token string, c int) {
	hc := &http.Client{Timeout: 10 * time.Second}
	for i := c; ; i++ {
		select {
		case <-l.stopped:
			return
		case <-ctx.Done():
			return
		default:
		}
		path := l.path(i)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		began := time.Now()
		resp, err := hc.Do(req)
		took := float64(time.Since(began).Microseconds()) / 1000
		ok := err == nil && resp.StatusCode == http.StatusOK
		if resp != nil {
			resp.Body.Close()
		}
		l.mu.Lock()
		l.millis = append(l.millis, took)
		if !ok {
			l.errors++
		}
		l.mu.Unlock()
	}
}

// path is the i-th call's route.
func (l *apiLoad) path(i int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tasks) == 0 || i%4 == 0 {
		return "/api/tasks?limit=50"
	}
	id := l.tasks[i%len(l.tasks)]
	switch i % 4 {
	case 1:
		return "/api/tasks/" + id.String() + "/realtime-status"
	case 2:
		return "/api/tasks/" + id.String()
	}
	return "/api/system/health"
}

// apiFigures are the load's latencies, sorted, and its failed calls.
type apiFigures struct {
	millis []float64
	errors int
}

func (a apiFigures) count() int { return len(a.millis) }

// percentile is the p-th percentile of the latencies (nearest rank).
func (a apiFigures) percentile(p float64) float64 {
	if len(a.millis) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(a.millis)))) - 1
	return a.millis[max(0, min(i, len(a.millis)-1))]
}

// stop ends the load and returns its figures.
func (l *apiLoad) stop() apiFigures {
	close(l.stopped)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	sort.Float64s(l.millis)
	return apiFigures{millis: l.millis, errors: l.errors}
}

// seed003Figures is what TestSeed003 measured.
type seed003Figures struct {
	tasks, parts int
	elapsed      time.Duration
	hops         int
	relay        time.Duration
	waits        waitHistogram
	dbP50, dbP95 float64
	api          apiFigures
}

// seed003Report prints each figure beside seed 003's target.
func seed003Report(f seed003Figures) string {
	var b strings.Builder
	perHour := float64(f.parts) / f.elapsed.Hours()
	relayPerHour := float64(f.hops) / f.relay.Hours()
	load := machineLoad()
	fmt.Fprintf(&b, "\n=== seed 003's targets on this machine (%d tasks, %d parts; load average %s: other work shares the CPU)\n", f.tasks, f.parts, load)
	fmt.Fprintf(&b, "| figure | measured | seed 003's target | how |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| throughput, parts (subtasks) an hour | %.0f (%d parts in %s) | > %d | the whole chain, engines answering at once (pooltest fakes) |\n",
		perHour, f.parts, f.elapsed.Round(time.Millisecond), seed003PartsPerHour)
	fmt.Fprintf(&b, "| raw relay baseline, messages an hour | %.0f (%d messages in %s) | — | plain AMQP publish+confirm, consume, ack, no work, same broker, same run; chain/relay = %.3f |\n",
		relayPerHour, f.hops, f.relay.Round(time.Millisecond), perHour/relayPerHour)
	fmt.Fprintf(&b, "| a part's queue wait p50 / p95 (dubflow_step_wait_seconds) | %.3f s / %.3f s (%.0f waits) | < %d s | the workers' histograms summed, interpolated as histogram_quantile |\n",
		f.waits.quantile(0.5), f.waits.quantile(0.95), f.waits.count, seed003WaitSeconds)
	fmt.Fprintf(&b, "| the same from task_steps.queue_wait_ms p50 / p95 | %.3f s / %.3f s | < %d s | percentile_cont over the tasks' attempts |\n",
		f.dbP50, f.dbP95, seed003WaitSeconds)
	fmt.Fprintf(&b, "| console API p50 / p99 under load | %.1f ms / %.1f ms (%d calls, %d not 200) | < %d ms | 4 clients in a loop during the run: task list, detail, realtime-status, system health |\n",
		f.api.percentile(50), f.api.percentile(99), f.api.count(), f.api.errors, seed003APIMillis)
	fmt.Fprintf(&b, "| completion rate | from the chaos run | > %.0f %% | done / tasks in the database, printed by `make chaos` (services/chaos's summary, line \"seed 003\") |\n",
		100*seed003Completion)
	fmt.Fprintf(&b, "| availability | from the chaos run | %.1f %% | submissions the system confirmed / requested, under the chaos run's faults (same line) |\n",
		100*seed003Availability)
	return b.String()
}

// machineLoad is /proc/loadavg's first three figures.
func machineLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
