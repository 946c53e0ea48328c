package step_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/rs/zerolog"
)

// TestHelperProcessWorker is not a test: it is the worker process that
// TestKilledWorkerStepIsTakenOverAfterItsLease starts and kills. It runs only
// when STEP_HELPER_PROCESS is set.
func TestHelperProcessWorker(t *testing.T) {
	if os.Getenv("STEP_HELPER_PROCESS") == "" {
		return
	}
	ctx := context.Background()
	pool, err := store.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := zerolog.New(os.Stderr)
	pubConn, err := broker.Dial(ctx, os.Getenv("AMQP_URL"), "helper-publish", log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	consConn, err := broker.Dial(ctx, os.Getenv("AMQP_URL"), "helper-consume", log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	lease, _ := strconv.Atoi(os.Getenv("STEP_HELPER_LEASE_SECONDS"))
	r, err := step.NewRunner(step.Config{
		Queue: wire.QueueASR,
		Routes: route(step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
			// Stuck in the middle of the work until killed.
			<-ctx.Done()
			return ctx.Err()
		})),
		Pool:      pool,
		Source:    step.BrokerSource(consConn, broker.ConsumeOptions{Queue: wire.QueueASR, Prefetch: 1, Concurrency: 1}),
		Publisher: broker.NewPublisher(pubConn),
		Delay:     broker.Topology{}.DelayExchange,
		Worker:    "doomed-worker",
		Lease:     time.Duration(lease) * time.Second,
		Log:       log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_ = r.Run(ctx)
	os.Exit(0)
}

func TestKilledWorkerStepIsTakenOverAfterItsLease(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const lease = 4 * time.Second
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STEP_HELPER_PROCESS=1", "DATABASE_URL="+h.db.URL, "AMQP_URL="+h.url,
		"STEP_HELPER_LEASE_SECONDS="+strconv.Itoa(int(lease/time.Second)))
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker process: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })

	env := asrEnvelope(t)
	h.publish(env)
	testenv.EventuallyWithin(t, 30*time.Second, "the doomed worker to claim the step", func() bool {
		var n int
		_ = h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM task_steps
			WHERE task_id = $1 AND status = 'running' AND worker = 'doomed-worker'`, env.TaskID).Scan(&n)
		return n == 1
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	_, _ = cmd.Process.Wait()
	killedAt := time.Now()

	var calls callLog
	r, stop := h.start(wire.QueueASR, route(effect(&calls)))
	defer stop()
	testenv.EventuallyWithin(t, 60*time.Second, "another worker to complete the step", func() bool { return h.effects(env.TaskID) == 1 })
	if took := time.Since(killedAt); took < lease/2 {
		t.Errorf("taken over after %s: sooner than the lease allows", took)
	}
	// Nothing of the message is left to deliver, and what the runner took
	// is settled: no later effect can come.
	testenv.EventuallyWithin(t, 30*time.Second, "the work queue to be empty", func() bool { return h.ready(wire.QueueASR) == 0 })
	stop()
	if n := h.effects(env.TaskID); n != 1 {
		t.Fatalf("effects = %d, want exactly 1", n)
	}
	var worker string
	var attempts int
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT max(worker), count(*) FROM task_steps
		WHERE task_id = $1 AND status = 'succeeded'`, env.TaskID).Scan(&worker, &attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || worker != r.Worker() {
		t.Fatalf("succeeded rows = %d by %q, want 1 by %q", attempts, worker, r.Worker())
	}
}

// TestBrokerRestartMidStreamLosesNothing streams 1,000 messages through a
// runner on a private broker and restarts the broker in the middle.
func TestBrokerRestartMidStreamLosesNothing(t *testing.T) {
	t.Parallel()
	rabbit := testenv.PrivateRabbit(t)
	h := setupOn(t, rabbit.URL())
	var calls callLog
	_, stop := h.start(wire.QueueASR, route(effect(&calls)))
	defer stop()
	const total = 1000
	envs := make([]*wire.Envelope, total)
	for i := range envs {
		envs[i] = asrEnvelope(t)
	}
	published := make(chan error, 1)
	go func() {
		for i, env := range envs {
			if i == total/3 {
				// Restart once the runner is busy with the stream.
				if !testenv.Poll(time.Now().Add(testenv.Within(t, 60*time.Second)), func() bool { return countEffects(h) >= total/4 }) {
					published <- fmt.Errorf("a quarter of the stream was not processed within %s", testenv.Within(t, 60*time.Second))
					return
				}
				rabbit.Restart()
			}
			body, _ := env.Marshal()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := h.pub.Publish(ctx, wire.Exchange, wire.QueueASR, amqpPublishing(body))
			cancel()
			if err != nil {
				published <- fmt.Errorf("publish %d: %w", i, err)
				return
			}
		}
		published <- nil
	}()
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 120*time.Second, "every message to be processed", func() bool { return countEffects(h) >= total })
	// Redeliveries after the restart are in the queue or with the runner:
	// wait until the queue is empty, then stop the runner, which settles
	// every delivery it took; no later effect can come.
	testenv.EventuallyWithin(t, 60*time.Second, "the work queue to be empty", func() bool { return h.ready(wire.QueueASR) == 0 })
	stop()
	var distinct, all int
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT task_id), count(*) FROM effects`).Scan(&distinct, &all); err != nil {
		t.Fatal(err)
	}
	if distinct != total || all != total {
		t.Fatalf("effects: %d distinct tasks, %d rows; want %d and %d (none lost, none duplicated)", distinct, all, total, total)
	}
}

func countEffects(h *harness) int {
	var n int
	_ = h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effects`).Scan(&n)
	return n
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("STEP_TEST_LOG") != "" {
		w.t.Logf("worker: %s", p)
	}
	return len(p), nil
}
