package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/service"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
)

// serve is a worker's run function serving task.asr with one route.
func serve(route step.Route) func(ctx context.Context, environ map[string]string) error {
	return func(ctx context.Context, environ map[string]string) error {
		var cfg config.Common
		p, err := service.Start(ctx, "test", environ, &cfg, service.LogTo(io.Discard))
		if err != nil {
			return err
		}
		defer p.Close()
		return (&worker.Deps{Process: p}).Serve(ctx, wire.QueueASR, []step.Route{route})
	}
}

func asrMessage(t *testing.T) *wire.Envelope {
	t.Helper()
	id := uuid.New()
	env, err := wire.New(wire.StepASR, id, "", wire.ASR{
		AudioKey: "audios/" + id.String() + "/source.wav", Language: "en",
		OutputKey: "asr/" + id.String() + "/asr.json",
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// A worker whose step timeout does not end a minute before
// the broker's consumer timeout refuses to start, naming the variables to
// change — the old default of 1800 s against RabbitMQ's 30 minutes.
func TestServeRefusesAStepTimeoutAtTheBrokerConsumerTimeout(t *testing.T) {
	t.Parallel()
	route := step.Route{Step: wire.StepASR, Timeout: 1800 * time.Second,
		Handler: step.HandlerFunc(func(context.Context, *step.Message) error { return nil })}
	s := testenv.NewStack(t, serve(route), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := serve(route)(ctx, s.Env)
	if err == nil {
		t.Fatal("a worker with TIMEOUT_ASR_SECONDS=1800 started against a 1800 s consumer timeout")
	}
	for _, want := range []string{"TIMEOUT_ASR_SECONDS=1800", "BROKER_CONSUMER_TIMEOUT_SECONDS=1800", "at most 1740"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// With the broker's timeout raised to match, the same worker serves.
	s.Env["BROKER_CONSUMER_TIMEOUT_SECONDS"] = "3600"
	s.Start()()
}

// Two consumers of one process (WORKER_CONCURRENCY=2) run
// two steps at once, each under a lease owner of its own.
func TestConsumersOfOneProcessHoldLeasesUnderTheirOwnWorkerIDs(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	route := step.Route{Step: wire.StepASR, Timeout: time.Minute,
		Handler: step.HandlerFunc(func(ctx context.Context, _ *step.Message) error {
			started.Done()
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})}
	s := testenv.NewStack(t, serve(route), map[string]string{"WORKER_CONCURRENCY": "2"})
	s.Start()
	a, b := asrMessage(t), asrMessage(t)
	s.Publish(a)
	s.Publish(b)
	waited := make(chan struct{})
	go func() { started.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(90 * time.Second):
		t.Fatal("the two steps did not run at once with WORKER_CONCURRENCY=2")
	}
	owners := map[uuid.UUID]string{}
	rows, err := s.DB.Pool.Query(context.Background(),
		`SELECT task_id, worker FROM task_steps WHERE status = 'running' AND task_id = ANY($1)`,
		[]uuid.UUID{a.TaskID, b.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		var w string
		if err := rows.Scan(&id, &w); err != nil {
			t.Fatal(err)
		}
		owners[id] = w
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	close(release)
	if len(owners) != 2 || owners[a.TaskID] == "" || owners[a.TaskID] == owners[b.TaskID] {
		t.Fatalf("lease owners of the two running steps: %v, want two different worker ids", owners)
	}
	s.WaitStep(a.TaskID, wire.StepASR, "succeeded")
	s.WaitStep(b.TaskID, wire.StepASR, "succeeded")
}

func TestWorkerIDsAreDistinct(t *testing.T) {
	t.Parallel()
	ids := worker.WorkerIDs("asr", 3)
	seen := map[string]bool{}
	for _, id := range worker.WorkerIDs("asr", 3) {
		seen[id] = true
	}
	for _, id := range ids {
		if seen[id] || !strings.HasPrefix(id, "asr-") {
			t.Errorf("worker id %q repeats across processes' calls or lacks the service", id)
		}
		seen[id] = true
	}
	if len(seen) != 6 {
		t.Errorf("ids %v: want 3 distinct", ids)
	}
}

// The retry promise with the default configuration (STEP_MAX_RETRIES=3):
// a transient failure is retried up to 3 times (1 s, 2 s, 4 s), then sent to
// the DLQ with retry_count 3 — four runs in all, never a fifth.
func TestTransientFailureIsRetriedThreeTimesThenDeadLettered(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var attempts []int
	route := step.Route{Step: wire.StepASR, Timeout: time.Minute,
		Handler: step.HandlerFunc(func(_ context.Context, m *step.Message) error {
			mu.Lock()
			attempts = append(attempts, m.Envelope.Attempt)
			mu.Unlock()
			return errors.New("engine unavailable")
		})}
	s := testenv.NewStack(t, serve(route), nil)
	s.Start()
	env := asrMessage(t)
	s.Publish(env)

	var dl wire.DeadLetter
	if err := json.Unmarshal(s.Next(wire.QueueDLQ, 90*time.Second), &dl); err != nil {
		t.Fatal(err)
	}
	if dl.RetryCount != 3 || dl.Attempt != 4 || dl.ErrorClass != wire.ClassTransient || dl.TaskID != env.TaskID {
		t.Errorf("dead letter retry_count %d attempt %d class %s task %s, want retry_count 3, attempt 4, transient, %s",
			dl.RetryCount, dl.Attempt, dl.ErrorClass, dl.TaskID, env.TaskID)
	}
	if !strings.Contains(dl.FailureReason, "retried 3 times") {
		t.Errorf("failure_reason %q does not say it was retried 3 times", dl.FailureReason)
	}
	// The four attempts are recorded, failed, each started at least its
	// delay tier (1 s, 2 s, 4 s) after the previous one ended.
	rows, err := s.DB.Pool.Query(context.Background(), `SELECT attempt, status,
		extract(epoch FROM started_at - lag(finished_at) OVER (ORDER BY attempt))::float8
		FROM task_steps WHERE task_id = $1 AND step = 'asr' ORDER BY attempt`, env.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		attempt int
		status  string
		gap     *float64
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.attempt, &r.status, &r.gap); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("task_steps has %d attempts, want 4 (the first and 3 retries): %+v", len(got), got)
	}
	for i, r := range got {
		if r.attempt != i+1 || r.status != "failed" {
			t.Errorf("attempt row %d: %+v, want attempt %d failed", i, r, i+1)
		}
		if i == 0 {
			continue
		}
		want := float64(int(1) << (i - 1))
		if r.gap == nil || *r.gap < want-0.1 {
			t.Errorf("retry %d started %v s after attempt %d ended, want at least %v s", i, r.gap, i, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 4 {
		t.Errorf("handler ran %d times (%v), want 4", len(attempts), attempts)
	}
	if n := s.Depth(wire.QueueDLQ); n != 0 {
		t.Errorf("%d more dead letters, want exactly one", n)
	}
}
