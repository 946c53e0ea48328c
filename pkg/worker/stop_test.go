package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestOneListenStopsEveryConsumersSteps: a worker process of three
// consumers holds one LISTEN on the task status channel, and cancelling
// two tasks running on two of its consumers stops both steps at once
// (their contexts end with fault.ErrTaskStopped), long before the lease
// heartbeat would (STEP_LEASE_SECONDS 60: every 20 s).
func TestOneListenStopsEveryConsumersSteps(t *testing.T) {
	t.Parallel()
	started, causes := make(chan struct{}, 2), make(chan error, 2)
	route := step.Route{Step: wire.StepASR, Timeout: time.Minute,
		Handler: step.HandlerFunc(func(ctx context.Context, _ *step.Message) error {
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})}
	s := testenv.NewStack(t, serve(route), map[string]string{"WORKER_CONCURRENCY": "3", "STEP_LEASE_SECONDS": "60"})
	s.Start()
	ctx := context.Background()
	var listening int
	s.WaitFor("the worker to LISTEN", func() bool {
		err := s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN '||$1`, task.StatusChannel).Scan(&listening)
		return err == nil && listening > 0
	})
	if listening != 1 {
		t.Errorf("%d LISTEN connections for a process of 3 consumers, want 1", listening)
	}
	a, b := asrMessage(t), asrMessage(t)
	for _, env := range []*wire.Envelope{a, b} {
		if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO tasks (id, status) VALUES ($1, 'running')`, env.TaskID); err != nil {
			t.Fatal(err)
		}
		s.Publish(env)
	}
	<-started
	<-started
	cancelled := time.Now()
	for _, env := range []*wire.Envelope{a, b} {
		if _, err := task.Apply(ctx, s.DB.Pool, task.Cancel(task.Ref{ID: env.TaskID}, "test")); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case cause := <-causes:
			if !errors.Is(cause, fault.ErrTaskStopped) {
				t.Errorf("a step ended with %v, want fault.ErrTaskStopped", cause)
			}
		case <-time.After(testenv.Within(t, 15*time.Second)):
			t.Fatal("a step of a cancelled task kept running")
		}
	}
	if took := time.Since(cancelled); took > 2*time.Second {
		t.Errorf("the steps stopped %s after the cancels, want within 2 s", took.Round(time.Millisecond))
	}
}
