package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
)

// startWorker builds and runs the extract_audio worker on f's database,
// virtual host and bucket, and waits until it is ready.
func startWorker(t *testing.T, f *fixture) *testenv.Proc {
	t.Helper()
	dir, err := testenv.SharedBinaries(wire.StepExtractAudio)
	if err != nil {
		t.Fatal(err)
	}
	s3 := f.srv.cfg.S3
	env := map[string]string{"DATABASE_URL": f.dbURL, "AMQP_URL": f.amqpURL, "S3_ENDPOINT": s3.Endpoint,
		"S3_ACCESS_KEY": s3.AccessKey, "S3_SECRET_KEY": s3.SecretKey, "S3_BUCKET": s3.Bucket,
		"S3_USE_SSL": strconv.FormatBool(s3.UseSSL), "WORKER_CONCURRENCY": "1", "SHUTDOWN_GRACE_SECONDS": "10"}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	p := testenv.StartProc(t, dir, wire.StepExtractAudio, env)
	t.Cleanup(func() { p.Stop(t, false) })
	p.WaitReady(t)
	return p
}

type queuesPage struct {
	Queues []queueView `json:"queues"`
}

type workersPage struct {
	Workers []worker.Process `json:"workers"`
}

// queue returns GET /api/queues' row of stepName.
func (f *fixture) queue(t *testing.T, stepName string) queueView {
	t.Helper()
	var page queuesPage
	f.doJSON(t, "GET", "/api/queues", nil, http.StatusOK, &page)
	for _, q := range page.Queues {
		if q.Step == stepName {
			return q
		}
	}
	t.Fatalf("GET /api/queues has no %s: %+v", stepName, page)
	return queueView{}
}

// workerOf returns GET /api/workers' process with pid, if listed.
func (f *fixture) workerOf(t *testing.T, pid int) (worker.Process, bool) {
	t.Helper()
	var page workersPage
	f.doJSON(t, "GET", "/api/workers", nil, http.StatusOK, &page)
	for _, w := range page.Workers {
		if w.PID == pid {
			return w, true
		}
	}
	return worker.Process{}, false
}

// within polls cond every 100 ms and fails unless it holds within d
// (the requirement's bound, not scaled) and returns how long it took;
// onFail, if set, runs before the failure.
func within(t *testing.T, d time.Duration, what string, cond func() bool, onFail func()) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			if onFail != nil {
				onFail()
			}
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// A pause through the API stops a real worker process taking work within
// 5 s (its consumers cancelled: the broker counts none), a task submitted
// meanwhile waits in the queue with no attempt, the pause is audited and
// survives in Postgres; resume makes the worker consume again and the task's
// extract_audio runs once. Then the worker is killed with SIGKILL and shows
// as lost within 30 s.
func TestPauseStopsAWorkerAndResumeRestartsIt(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	p := startWorker(t, f)
	pid := p.Cmd.Process.Pid
	testenv.Eventually(t, "the worker in GET /api/workers", func() bool {
		w, ok := f.workerOf(t, pid)
		return ok && w.Status == "idle" && w.Service == wire.StepExtractAudio && w.Consumers == 1 && w.Version != ""
	})
	// A message the worker dead-letters first (its video is missing).
	lost := uuid.New()
	keys := wire.DefaultKeys(lost)
	env, err := wire.New(wire.StepExtractAudio, lost, "pause-test", wire.ExtractAudio{SourceVideoKey: keys.SourceVideo,
		OutputAudioKey: keys.SourceAudio, SourceLanguage: "en", TargetLanguage: "es"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := env.Marshal()
	if err := f.ch.PublishWithContext(ctx, wire.Exchange, wire.RoutingKey(wire.StepExtractAudio), false, false, amqpMsg(string(raw))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the missing video's attempt to fail", func() bool {
		var n int
		_ = f.pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND status = 'failed'`, lost).Scan(&n)
		return n == 1
	})
	if q := f.queue(t, wire.StepExtractAudio); q.Paused || q.Consumers != 1 || q.Workers != 1 {
		t.Fatalf("before the pause: %+v, want 1 consumer of 1 worker, not paused", q)
	}

	// Paused while idle: the broker counts no consumer within 5 s.
	var pause worker.Pause
	f.doJSON(t, "POST", "/api/queues/extract_audio/pause", nil, http.StatusOK, &pause)
	if !pause.Paused || pause.ChangedBy != "admin" {
		t.Fatalf("pause answered %+v", pause)
	}
	took := within(t, 5*time.Second, "consumers cancelled after the pause", func() bool {
		return f.queue(t, wire.StepExtractAudio).Consumers == 0
	}, func() { dumpGoroutines(t, p) })
	t.Logf("paused while idle: consumers gone after %s", took)
	f.doJSON(t, "POST", "/api/queues/extract_audio/resume", nil, http.StatusOK, &pause)
	within(t, 5*time.Second, "consumers back after the resume", func() bool {
		return f.queue(t, wire.StepExtractAudio).Consumers == 1
	}, nil)

	// Paused while a step runs: the worker cancels its consumer within 5 s
	// (it says so on /metrics) and the step finishes; a quorum queue keeps
	// counting a cancelled consumer until its delivery is acked.
	busy := f.submitSample(t)
	testenv.Eventually(t, "the worker running the first task", func() bool {
		var n int
		_ = f.pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND status = 'running'`, busy).Scan(&n)
		return n == 1
	})
	f.doJSON(t, "POST", "/api/queues/extract_audio/pause", nil, http.StatusOK, &pause)
	took = within(t, 5*time.Second, "the worker paused after the pause", func() bool {
		return strings.Contains(metrics(t, p), `dubflow_step_paused{step="extract_audio"} 1`)
	}, func() { dumpGoroutines(t, p) })
	t.Logf("paused during a step: consumer cancelled after %s", took)
	testenv.Eventually(t, "the step in flight to finish while paused", func() bool { return succeeded(t, f, busy) })
	testenv.Eventually(t, "no consumer once the step in flight is acked", func() bool {
		return f.queue(t, wire.StepExtractAudio).Consumers == 0
	})
	testenv.Eventually(t, "the worker shown paused", func() bool {
		w, _ := f.workerOf(t, pid)
		return w.Status == "paused"
	})

	waiting := f.submitSample(t)
	within(t, 5*time.Second, "the task's message in the queue", func() bool { return f.queue(t, wire.StepExtractAudio).Ready == 1 }, nil)
	time.Sleep(3 * time.Second) // a paused worker must not take it: nothing to wait for
	if q := f.queue(t, wire.StepExtractAudio); q.Ready != 1 || q.Consumers != 0 {
		t.Fatalf("paused, 3 s later: %+v, want the message still ready and no consumer", q)
	}
	if n := attempts(t, f, waiting); n != 0 {
		t.Fatalf("%d attempts while paused, want 0", n)
	}

	f.doJSON(t, "POST", "/api/queues/extract_audio/resume", nil, http.StatusOK, &pause)
	took = within(t, 5*time.Second, "consumers back after the resume", func() bool {
		return f.queue(t, wire.StepExtractAudio).Consumers == 1
	}, nil)
	t.Logf("resumed: consumers back after %s", took)
	testenv.Eventually(t, "extract_audio to succeed after the resume", func() bool { return succeeded(t, f, waiting) })
	for _, id := range []uuid.UUID{busy, waiting} {
		if n := attempts(t, f, id); n != 1 {
			t.Fatalf("%d attempts of extract_audio of %s, want 1 (the pause spent no retry)", n, id)
		}
	}
	testenv.Eventually(t, "the finished runs counted", func() bool {
		w, _ := f.workerOf(t, pid)
		return w.Done == 2 && w.Failed == 1 && w.Status == "idle"
	})
	checkAudited(t, f, 2, "pause", "resume")

	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took = within(t, 30*time.Second, "the killed worker shown lost", func() bool {
		w, _ := f.workerOf(t, pid)
		return w.Status == "lost"
	}, nil)
	t.Logf("killed: lost after %s", took)
	if q := f.queue(t, wire.StepExtractAudio); q.Workers != 0 {
		t.Fatalf("a lost worker still counts as serving the queue: %+v", q)
	}
}

// submitSample creates a task of a 2 s sample video and returns its id.
func (f *fixture) submitSample(t *testing.T) uuid.UUID {
	t.Helper()
	ct, body := multipartBody(t, sampleVideo(t, "2"), map[string]string{"source": "en", "target": "es"})
	var c created
	decode(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body), http.StatusCreated, &c)
	return c.TaskID
}

// succeeded reports whether task id's extract_audio succeeded.
func succeeded(t *testing.T, f *fixture, id uuid.UUID) bool {
	t.Helper()
	var n int
	_ = f.pool.QueryRow(context.Background(), `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'extract_audio'
		AND status = 'succeeded'`, id).Scan(&n)
	return n == 1
}

// metrics returns the worker's /metrics.
func metrics(t *testing.T, p *testenv.Proc) string {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// dumpGoroutines makes the worker print its goroutines (SIGQUIT) and logs
// them.
func dumpGoroutines(t *testing.T, p *testenv.Proc) {
	_ = p.Cmd.Process.Signal(syscall.SIGQUIT)
	time.Sleep(2 * time.Second)
	t.Logf("goroutines of %s:\n%s", p.Name, testenv.Tail(p.Log, 400))
}

// attempts counts the extract_audio attempts of task id.
func attempts(t *testing.T, f *fixture, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM task_steps WHERE task_id = $1
		AND step = 'extract_audio'`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkAudited fails unless GET /api/audit lists each action n times, on
// extract_audio by the admin token.
func checkAudited(t *testing.T, f *fixture, n int, actions ...string) {
	t.Helper()
	for _, a := range actions {
		var page audit.Page
		f.doJSON(t, "GET", "/api/audit?action="+a, nil, http.StatusOK, &page)
		if len(page.Entries) != n {
			t.Fatalf("audit of %s: %d entries, want %d: %+v", a, len(page.Entries), n, page.Entries)
		}
		for _, e := range page.Entries {
			if e.Target != wire.StepExtractAudio || e.Actor != "admin" || e.Outcome != "ok" || e.Status != http.StatusOK {
				t.Fatalf("audit of %s: %+v", a, e)
			}
		}
	}
}

// A read-only token may read the queues and the workers but not pause;
// an unknown step is 404; the pause outlives the process that read it.
func TestPauseNeedsAdminAndNamesAStep(t *testing.T) {
	t.Parallel()
	f := setup(t)
	decode(t, f.do(t, "GET", "/api/queues", readToken, "", nil), http.StatusOK, nil)
	decode(t, f.do(t, "GET", "/api/workers", readToken, "", nil), http.StatusOK, nil)
	decode(t, f.do(t, "POST", "/api/queues/asr/pause", readToken, "", nil), http.StatusForbidden, nil)
	decode(t, f.do(t, "POST", "/api/queues/nope/pause", adminToken, "", nil), http.StatusNotFound, nil)
	f.doJSON(t, "POST", "/api/queues/asr/pause", nil, http.StatusOK, nil)
	steps, err := worker.PausedSteps(context.Background(), f.pool)
	if err != nil || len(steps) != 1 || steps[0] != wire.StepASR {
		t.Fatalf("paused steps %v (%v), want [asr]", steps, err)
	}
	if q := f.queue(t, wire.StepASR); !q.Paused || q.ChangedBy != "admin" || q.ChangedAt == nil {
		t.Fatalf("GET /api/queues: %+v", q)
	}
	// The health page shows the paused step as paused, not as a step no
	// worker consumes (no worker runs in this test: the others are).
	var h healthReport
	f.doJSON(t, "GET", "/api/system/health", nil, http.StatusOK, &h)
	for _, st := range h.Services.Steps {
		if st.Paused != (st.Step == wire.StepASR) {
			t.Errorf("health: step %s paused=%v", st.Step, st.Paused)
		}
	}
	if !slices.Contains(h.Reasons, "no workers consume task.translate (0 messages waiting)") {
		t.Errorf("health reasons %q: want translate's missing workers", h.Reasons)
	}
	for _, r := range h.Reasons {
		if strings.Contains(r, "task.asr") {
			t.Errorf("health reason %q for the paused step", r)
		}
	}
}
