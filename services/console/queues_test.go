package main

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
)

// startWorker builds and runs the extract_audio worker on f's database,
// virtual host and bucket, and waits until it is ready.
func startWorker(t *testing.T, f *fixture) *testenv.Proc {
	t.Helper()
	dir := t.TempDir()
	if err := testenv.BuildServices(dir, wire.StepExtractAudio); err != nil {
		t.Fatal(err)
	}
	s3 := f.srv.cfg.S3
	env := map[string]string{"DATABASE_URL": f.dbURL, "AMQP_URL": f.amqpURL, "S3_ENDPOINT": s3.Endpoint,
		"S3_ACCESS_KEY": s3.AccessKey, "S3_SECRET_KEY": s3.SecretKey, "S3_BUCKET": s3.Bucket,
		"S3_USE_SSL": strconv.FormatBool(s3.UseSSL), "WORKER_CONCURRENCY": "2", "SHUTDOWN_GRACE_SECONDS": "10"}
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
// (the requirement's bound, not scaled) and returns how long it took.
func within(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
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
		return ok && w.Status == "idle" && w.Service == wire.StepExtractAudio && w.Consumers == 2 && w.Version != ""
	})
	if q := f.queue(t, wire.StepExtractAudio); q.Paused || q.Consumers != 2 || q.Workers != 1 {
		t.Fatalf("before the pause: %+v, want 2 consumers of 1 worker, not paused", q)
	}

	var pause worker.Pause
	f.doJSON(t, "POST", "/api/queues/extract_audio/pause", nil, http.StatusOK, &pause)
	if !pause.Paused || pause.ChangedBy != "admin" {
		t.Fatalf("pause answered %+v", pause)
	}
	took := within(t, 5*time.Second, "consumers cancelled after the pause", func() bool {
		return f.queue(t, wire.StepExtractAudio).Consumers == 0
	})
	t.Logf("paused: consumers gone after %s", took)
	testenv.Eventually(t, "the worker shown paused", func() bool {
		w, _ := f.workerOf(t, pid)
		return w.Status == "paused"
	})

	ct, body := multipartBody(t, sampleVideo(t, "2"), map[string]string{"source": "en", "target": "es"})
	var c created
	decode(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body), http.StatusCreated, &c)
	within(t, 5*time.Second, "the task's message in the queue", func() bool { return f.queue(t, wire.StepExtractAudio).Ready == 1 })
	time.Sleep(3 * time.Second) // a paused worker must not take it: nothing to wait for
	if q := f.queue(t, wire.StepExtractAudio); q.Ready != 1 || q.Consumers != 0 {
		t.Fatalf("paused, 3 s later: %+v, want the message still ready and no consumer", q)
	}
	if n := attempts(t, f, c.TaskID); n != 0 {
		t.Fatalf("%d attempts while paused, want 0", n)
	}

	f.doJSON(t, "POST", "/api/queues/extract_audio/resume", nil, http.StatusOK, &pause)
	took = within(t, 5*time.Second, "consumers back after the resume", func() bool {
		return f.queue(t, wire.StepExtractAudio).Consumers == 2
	})
	t.Logf("resumed: consumers back after %s", took)
	testenv.Eventually(t, "extract_audio to succeed after the resume", func() bool {
		var n int
		_ = f.pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'extract_audio'
			AND status = 'succeeded'`, c.TaskID).Scan(&n)
		return n == 1
	})
	if n := attempts(t, f, c.TaskID); n != 1 {
		t.Fatalf("%d attempts of extract_audio, want 1 (the pause spent no retry)", n)
	}
	testenv.Eventually(t, "the finished run counted", func() bool {
		w, _ := f.workerOf(t, pid)
		return w.Done == 1 && w.Failed == 0 && w.Status == "idle"
	})
	checkAudited(t, f, "pause", "resume")

	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took = within(t, 30*time.Second, "the killed worker shown lost", func() bool {
		w, _ := f.workerOf(t, pid)
		return w.Status == "lost"
	})
	t.Logf("killed: lost after %s", took)
	if q := f.queue(t, wire.StepExtractAudio); q.Workers != 0 {
		t.Fatalf("a lost worker still counts as serving the queue: %+v", q)
	}
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

// checkAudited fails unless GET /api/audit lists each action on
// extract_audio by the admin token.
func checkAudited(t *testing.T, f *fixture, actions ...string) {
	t.Helper()
	for _, a := range actions {
		var page auditPage
		f.doJSON(t, "GET", "/api/audit?action="+a, nil, http.StatusOK, &page)
		if len(page.Entries) != 1 || page.Entries[0].Target != wire.StepExtractAudio ||
			page.Entries[0].Actor != "admin" || page.Entries[0].Outcome != "ok" {
			t.Fatalf("audit of %s: %+v", a, page.Entries)
		}
	}
}

// A read-only token may read the queues and the workers but not pause;
// an unknown step is 404; the pause outlives the process that read it.
func TestPauseNeedsAdminAndNamesAStep(t *testing.T) {
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
}
