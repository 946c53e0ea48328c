package pool_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool/pooltest"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestNoQuotaSpentOnAStoppedTask: a call whose step stopped because its
// task was cancelled (the step runtime cancels its context with
// fault.ErrTaskStopped) reserves nothing, and a call cut short that way
// while the engine works gives its units back.
func TestNoQuotaSpentOnAStoppedTask(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	clk := &clock{}
	f := pooltest.New(t, pooltest.Hang)
	f.Quota = 1000
	m := member("paid", f)
	p, tr := replica(t, db.Pool, clk, m)

	// Stopped before the call: no reservation, no request.
	ctx, stop := context.WithCancelCause(context.Background())
	stop(fault.ErrTaskStopped)
	if _, err := tr.Translate(ctx, []string{"hello there"}, "en", "es"); !errors.Is(err, fault.ErrTaskStopped) {
		t.Fatalf("translate for a stopped task: %v, want fault.ErrTaskStopped", err)
	}
	if c := f.Counters(); c.Calls != 0 {
		t.Errorf("the engine saw %d calls of a stopped task, want none", c.Calls)
	}
	if s := status(t, p, "paid"); s.Used != 0 {
		t.Errorf("quota used %d by a stopped task, want 0", s.Used)
	}

	// Stopped while the engine works: the call ends, its units come back.
	ctx, stop = context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tr.Translate(ctx, []string{"hello there"}, "en", "es")
		done <- err
	}()
	testenv.Eventually(t, "the engine to take the call", func() bool { return f.Counters().Calls == 1 })
	stop(fault.ErrTaskStopped)
	if err := <-done; !errors.Is(err, context.Canceled) && !errors.Is(err, fault.ErrTaskStopped) {
		t.Fatalf("translate cut short: %v", err)
	}
	p.Sched.Flush()
	if s := status(t, p, "paid"); s.Used != 0 {
		t.Errorf("quota used %d by a call its stopped task cut short, want 0 (refunded)", s.Used)
	}
}
