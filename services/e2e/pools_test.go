package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/pool/pooltest"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// poolFakes are the fake engines of the three pools, by step, and the
// pools' configuration (what ASR_POOL, TRANSLATE_POOL and TTS_POOL hold).
type poolFakes struct {
	fakes map[string][]*pooltest.Fake
	pools map[string]pool.Config
	// resetHour is the pools' reset hour (UTC), twelve hours away from the
	// test's start so that no run meets a real reset.
	resetHour int
}

// newPoolFakes builds three fake engines per step, with small limits and
// every way of failing: each step has one engine answering 429 with
// Retry-After now and then and one answering 503 now and then; asr and tts
// have an engine that hangs or always fails; translate's quotas serve
// quotaTasks tasks a day, and its third engine's key is out (it answers a
// 429 naming its quota, which the pool does not know beforehand).
func newPoolFakes(t *testing.T, quotaTasks int) *poolFakes {
	f := &poolFakes{fakes: map[string][]*pooltest.Fake{}, pools: map[string]pool.Config{}, resetHour: (time.Now().UTC().Hour() + 12) % 24}
	perTask := len(pooltest.Transcript) // one line per task
	add := func(step, name, kind string, fake *pooltest.Fake, root bool, lim pool.Limits) {
		m := pool.Member{Name: name, Kind: kind, APIKey: pooltest.Key, BaseURL: fake.Root(), Limits: lim, TimeoutSeconds: 3}
		if !root {
			m.BaseURL = fake.URL()
		}
		f.fakes[step] = append(f.fakes[step], fake)
		c := f.pools[step]
		c.ResetHour = f.resetHour
		c.Engines = append(c.Engines, m)
		f.pools[step] = c
	}
	flaky := func(mode pooltest.Mode, every, concurrency, quota int) *pooltest.Fake {
		fk := pooltest.New(t, pooltest.Serve)
		fk.Flaky, fk.FlakyMode, fk.Concurrency, fk.Quota, fk.RetryAfter = every, mode, concurrency, quota, 1
		fk.Delay = 50 * time.Millisecond
		return fk
	}
	add("asr", "asr-a", speech.EngineOpenAI, flaky(pooltest.RateLimited, 5, 2, 0), true, pool.Limits{Concurrency: 2, Weight: 2})
	add("asr", "asr-b", speech.EngineOpenAI, flaky(pooltest.ServerError, 4, 2, 0), true, pool.Limits{Concurrency: 2})
	add("asr", "asr-hang", speech.EngineOpenAI, pooltest.New(t, pooltest.Hang), true, pool.Limits{Weight: 3})
	q := quotaTasks / 2 * perTask
	add("translate", "tr-a", speech.EngineOpenAI, flaky(pooltest.RateLimited, 4, 1, q), false, pool.Limits{Concurrency: 1, DailyQuota: int64(q)})
	add("translate", "tr-b", speech.EngineOpenAI, flaky(pooltest.ServerError, 3, 1, q), false, pool.Limits{Concurrency: 1, DailyQuota: int64(q)})
	add("translate", "tr-spent", speech.EngineOpenAI, flaky(pooltest.Serve, 0, 0, 1), false, pool.Limits{Weight: 5})
	add("tts", "tts-a", speech.EngineOpenAI, flaky(pooltest.RateLimited, 3, 2, 0), true, pool.Limits{Concurrency: 2})
	add("tts", "tts-svc", speech.EngineTTSService, flaky(pooltest.ServerError, 5, 2, 0), true, pool.Limits{Concurrency: 2})
	add("tts", "tts-down", speech.EngineOpenAI, pooltest.New(t, pooltest.ServerError), true, pool.Limits{Weight: 3})
	return f
}

// env is the pools' configuration as the workers read it.
func (f *poolFakes) env(t *testing.T) map[string]string {
	env := map[string]string{"WORKER_CONCURRENCY": "2"}
	for step, c := range f.pools {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		env[strings.ToUpper(step)+"_POOL"] = string(b)
	}
	return env
}

// checkLimits: no fake engine ever saw a call over its own quota (in its
// current day) or its concurrency, counted by the fake itself. Engines
// whose quota the pool was not told of (keyOut) may be asked past it.
func (f *poolFakes) checkLimits(t *testing.T, when string, keyOut map[*pooltest.Fake]bool) {
	t.Helper()
	for step, fakes := range f.fakes {
		for i, fk := range fakes {
			c, name := fk.Counters(), f.pools[step].Engines[i].Name
			if c.OverParallel != 0 || (fk.Concurrency > 0 && c.MaxInFlight > fk.Concurrency) {
				t.Errorf("%s: %s saw %d calls at once (%d over its concurrency %d)", when, name, c.MaxInFlight, c.OverParallel, fk.Concurrency)
			}
			if !keyOut[fk] && (c.OverQuota != 0 || (fk.Quota > 0 && c.Units > fk.Quota)) {
				t.Errorf("%s: %s served %d units of its quota %d, %d calls over it", when, name, c.Units, fk.Quota, c.OverQuota)
			}
			t.Logf("%s: %s %+v", when, name, c)
		}
	}
}

// poolTasks is how many tasks TestEnginePools dubs: DUBFLOW_POOLS_TASKS
// (make pools-proof: 50), else 6.
func poolTasks(t *testing.T) int {
	v := os.Getenv("DUBFLOW_POOLS_TASKS")
	if v == "" {
		return 6
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 3 {
		t.Fatalf("DUBFLOW_POOLS_TASKS=%q: want a whole number, at least 3", v)
	}
	return n
}

// TestEnginePools dubs DUBFLOW_POOLS_TASKS tasks (6; 50 in make
// pools-proof) through two replicas of each worker (the real binaries)
// whose asr, translate and tts steps each use a pool of three fake
// engines: every task is done; no engine is ever over its quota or its
// concurrency (the fakes' own counters); no attempt that is not a wait
// failed, so no retry was spent on a 429 or a 5xx; the tasks translate's
// quotas cannot serve wait for the quota, and go on by themselves when the
// quota resets (the schedule's clock moved a day on).
func TestEnginePools(t *testing.T) {
	n := poolTasks(t)
	quotaTasks := 2 * ((n*3 + 9) / 10) // about 60 %, even: split over two engines
	fk := newPoolFakes(t, quotaTasks)
	s := newStack(t, fk.env(t))
	for i := range 2 {
		for _, name := range workers {
			s.procs[fmt.Sprintf("%s-%d", name, i)] = &proc{testenv.StartProc(t, binDir, name, s.env)}
		}
	}
	s.procs["dlq_recorder"] = &proc{testenv.StartProc(t, binDir, "dlq_recorder", s.env)}
	for _, p := range s.procs {
		t.Cleanup(func() { p.Stop(t, true) })
		p.WaitReady(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Within(t, 15*time.Minute))
	defer cancel()
	video := filepath.Join(t.TempDir(), "clip.mp4")
	if err := media.MakeSampleVideo(ctx, sampleText, video, media.SampleOptions{Lead: sampleLead}); err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = s.submit(t, ctx, video)
	}

	// Day one: the tasks translate's quota serves are done, the others wait
	// for the quota until the next reset.
	var tasks map[uuid.UUID]*view.Task
	testenv.EventuallyWithin(t, 10*time.Minute, "every task done or waiting for translate's quota", func() bool {
		tasks = s.loadTasks(t, ctx, ids)
		return count(tasks, "done", "") > 0 && count(tasks, "done", "")+count(tasks, "", "no_quota") == n
	})
	parked := s.checkParked(t, ctx, tasks, fk.resetHour)
	t.Logf("day one: %d tasks done, %d waiting for quota", n-len(parked), len(parked))
	tr := fk.fakes["translate"]
	fk.checkLimits(t, "day one", map[*pooltest.Fake]bool{tr[2]: true})

	// The reset: the schedule's clock moves a day on (its window and the
	// spent engine's cool-down start a day earlier), the fakes' days start
	// again. Nothing else is done: the parked tasks go on by themselves.
	if _, err := s.db.Pool.Exec(ctx, `UPDATE engine_schedule SET window_start = window_start - interval '1 day',
		cooled_until = CASE WHEN cooled_until > now() THEN cooled_until - interval '1 day' ELSE cooled_until END
		WHERE step = 'translate'`); err != nil {
		t.Fatal(err)
	}
	for _, f := range tr {
		f.ResetQuota()
	}
	testenv.EventuallyWithin(t, 5*time.Minute, "every task done after the reset", func() bool {
		tasks = s.loadTasks(t, ctx, ids)
		return count(tasks, "done", "") == n || count(tasks, "failed", "") > 0
	})
	for id, v := range tasks {
		if v.Status != "done" {
			t.Errorf("task %s %s: %s", id, v.Status, v.Error)
		}
	}
	fk.checkLimits(t, "day two", map[*pooltest.Fake]bool{tr[2]: true})
	checkNoRetrySpent(t, tasks)
	if c := tr[2].Counters(); c.Served != 0 {
		t.Errorf("the engine whose key is out served %d calls", c.Served)
	}
	fk.checkFaultsMet(t)
}

// checkFaultsMet: the pools met every fault the fakes can make (a 429
// with Retry-After, a 503, a hang), so that the run proves something.
func (f *poolFakes) checkFaultsMet(t *testing.T) {
	t.Helper()
	seen := map[int]int{}
	for _, fakes := range f.fakes {
		for _, fk := range fakes {
			for status, n := range fk.Counters().Status {
				seen[status] += n
			}
		}
	}
	if seen[http.StatusTooManyRequests] == 0 || seen[http.StatusServiceUnavailable] == 0 || seen[0] == 0 {
		t.Errorf("answers of the fakes %v: want 429s, 503s and hangs among them", seen)
	}
}

// loadTasks reads the tasks through the read model.
func (s *stack) loadTasks(t *testing.T, ctx context.Context, ids []uuid.UUID) map[uuid.UUID]*view.Task {
	out := map[uuid.UUID]*view.Task{}
	for _, id := range ids {
		v, err := view.Load(ctx, s.db.Pool, id)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = v
	}
	return out
}

// count counts the tasks in status (any when "") waiting for reason (any
// or none when "").
func count(tasks map[uuid.UUID]*view.Task, status, reason string) int {
	n := 0
	for _, v := range tasks {
		if (status == "" || v.Status == status) && (reason == "" || (v.Waiting != nil && v.Waiting.Reason == reason)) {
			n++
		}
	}
	return n
}

// checkParked: the waiting tasks wait in translate for quota until the
// next reset (resetHour:00 UTC), and dubctl says so. It returns them.
func (s *stack) checkParked(t *testing.T, ctx context.Context, tasks map[uuid.UUID]*view.Task, resetHour int) []uuid.UUID {
	var parked []uuid.UUID
	now := time.Now().UTC()
	reset := time.Date(now.Year(), now.Month(), now.Day(), resetHour, 0, 0, 0, time.UTC)
	if !reset.After(now) {
		reset = reset.Add(24 * time.Hour)
	}
	want := fmt.Sprintf("waiting for quota until %02d:00 UTC", resetHour)
	for id, v := range tasks {
		if w := v.Waiting; w != nil {
			parked = append(parked, id)
			if w.Step != "translate" || !w.Until.Equal(reset) || w.Message != want {
				t.Errorf("task %s waits %+v; want translate waiting for quota until %s", id, w, reset)
			}
		}
	}
	if len(parked) == 0 {
		t.Fatal("no task waits for quota: the quotas did not bind")
	}
	stdout, stderr, code := s.dubctl(t, ctx, "status", parked[0].String())
	if code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("dubctl status of a parked task: exit %d, %s%s; want it waiting for quota", code, stdout, stderr)
	}
	return parked
}

// checkNoRetrySpent: every attempt of every part either succeeded or
// waited for an engine (a wait spends no retry): no 429, 5xx or hang
// reached the step's retry budget.
func checkNoRetrySpent(t *testing.T, tasks map[uuid.UUID]*view.Task) {
	t.Helper()
	waits := map[string]int{}
	for id, v := range tasks {
		for _, st := range v.Steps {
			for _, p := range st.Parts {
				for _, a := range p.Attempts {
					switch {
					case a.WaitReason != "":
						waits[st.Step+" "+a.WaitReason]++
					case a.Status != "succeeded":
						t.Errorf("task %s %s part %q attempt %d %s: %s (a retry spent)", id, st.Step, p.Part, a.Attempt, a.Status, a.Error)
					}
				}
			}
		}
	}
	t.Logf("waited attempts: %v", waits)
}
