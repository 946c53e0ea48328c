//go:build cgo && pocketsphinx_lib

package main

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestStalledDecodeReplacesTheWorker: a worker whose loaded decoder stops
// inside the C library (its first utterance's raw-audio log, -rawlogdir,
// is a FIFO nobody reads: fopen waits there, no sample is consumed and no
// context reaches it) gives up the decode after ASR_STALL_SECONDS: /readyz
// fails naming the recognizer, the message is handed back without spending
// a retry (the lease released, the hand-back in the task's timeline), and
// run returns the stall (a non-zero exit) on its own, once the hand-back is
// done. Another worker then takes the message and transcribes it as
// attempt 1: the task's retry budget was not touched.
func TestStalledDecodeReplacesTheWorker(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	fifo := filepath.Join(logDir, "000000000.raw")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The stalled decoder stays stuck on the FIFO until the test binary
	// exits, as a real one would until its process is replaced.
	// -maxhmmpf 5995: a configuration, so a pool of decoders, of its own.
	s := testenv.NewStack(t, run, map[string]string{"WORKER_CONCURRENCY": "1", "ASR_STALL_SECONDS": "3",
		"POCKETSPHINX_SEARCH": "-fwdflat no -maxhmmpf 5995 -rawlogdir " + logDir})
	stuck, exited := serveUntilExit(t, s.Env)
	s.Ch = testenv.Channel(t, s.Env["AMQP_URL"])
	readiness := watchReadiness(s.Env["OPS_ADDR"], exited)

	env := newTask(s, filepath.Join(fixtures(t), "jfk.wav"))
	s.Publish(env)
	select {
	case <-exited:
	case <-time.After(testenv.Within(t, 2*time.Minute)):
		t.Fatal("the worker still runs 2 minutes after its decode stalled")
	}
	if err := stuck(); !errors.Is(err, errReplaced) || !errors.Is(err, speech.ErrStalled) {
		t.Fatalf("run returned %v, want the stalled decode (a non-zero exit)", err)
	}
	got := <-readiness
	if !strings.Contains(got, "recognizer") || !strings.Contains(got, "stalled") {
		t.Fatalf("/readyz while the worker stopped: %q, want 503 naming the stalled recognizer", got)
	}
	t.Logf("/readyz after the stall: %s", strings.TrimSpace(got))
	backs := handBacks(t, s, env)
	if len(backs) != 1 || backs[0].Status != "unavailable" || !strings.Contains(backs[0].Detail, "stalled") ||
		backs[0].Attempt == nil || *backs[0].Attempt != 1 {
		t.Fatalf("hand-backs %+v, want one of attempt 1, unavailable, naming the stall", backs)
	}

	// Another worker takes the message and transcribes it.
	other := maps.Clone(s.Env)
	other["OPS_ADDR"] = testenv.FreeAddr(t)
	delete(other, "POCKETSPHINX_SEARCH")
	delete(other, "ASR_STALL_SECONDS")
	testenv.Serve(t, run, other)
	if got := s.WaitStep(env.TaskID, wire.StepASR, "succeeded", "failed"); got != "succeeded" {
		t.Fatalf("asr %s after the hand-back: %+v", got, s.Task(env.TaskID))
	}
	var attempts, failed, succeededAs int
	err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE status NOT IN ('succeeded', 'running')),
		max(attempt) FILTER (WHERE status = 'succeeded') FROM task_steps WHERE task_id = $1 AND step = 'asr'`, env.TaskID).
		Scan(&attempts, &failed, &succeededAs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("asr attempts: %d rows, succeeded as attempt %d", attempts, succeededAs)
	if failed != 0 || succeededAs != 1 {
		t.Fatalf("asr attempts: %d rows, %d not succeeded, succeeded as attempt %d; want attempt 1 succeeded and none failed", attempts, failed, succeededAs)
	}
}

// serveUntilExit runs the worker in-process with env, waits until it is
// ready, and returns what run returned (once exited is closed) and exited.
// The test's end cancels it, if it still runs.
func serveUntilExit(t *testing.T, env map[string]string) (result func() error, exited <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = run(ctx, env)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(testenv.Within(t, 30*time.Second)):
			t.Error("the worker still runs 30 s after its context was cancelled")
		}
	})
	testenv.WaitReady(t, "asr", env["OPS_ADDR"], done, func() string { return "exited" })
	return func() error { <-done; return err }, done
}

// watchReadiness asks addr's /readyz every 10 ms until exited is closed
// and delivers its first answer other than 200 that names the recognizer
// ("" if none came).
func watchReadiness(addr string, exited <-chan struct{}) <-chan string {
	out := make(chan string, 1)
	go func() {
		client := &http.Client{Timeout: time.Second}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-exited:
				out <- ""
				return
			case <-t.C:
			}
			resp, err := client.Get("http://" + addr + "/readyz")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// /readyz names one failing check, in no set order.
			if resp.StatusCode != http.StatusOK && strings.Contains(string(body), "recognizer") {
				out <- resp.Status + ": " + string(body)
				return
			}
		}
	}()
	return out
}

// handBacks returns the hand-back events of env's task.
func handBacks(t *testing.T, s *testenv.Stack, env *wire.Envelope) []view.Event {
	t.Helper()
	evs, err := view.Timeline(context.Background(), s.DB.Pool, env.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var out []view.Event
	for _, e := range evs {
		if e.Kind == view.EventHandBack {
			out = append(out, e)
		}
	}
	return out
}
