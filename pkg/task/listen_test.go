package task_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestListenerWakesOnStatusChanges: a Listener's wait returns when a
// transition moves a watched task's status, long before its interval, and
// not for another task, nor for a transition that keeps the status.
func TestListenerWakesOnStatusChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	mine, other := seed(t, db.Pool, "queued"), seed(t, db.Pool, "queued")
	l := task.Listen(ctx, db.Pool)
	defer l.Close()
	if !l.Listening() {
		t.Fatal("LISTEN failed: waits would only run out their interval")
	}
	itsOwn := func(id string) bool { return id == mine.String() }
	// quiet waits an hour's interval within 2 s: it must run into the
	// context's end, nothing having woken it.
	quiet := func(what string) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := l.Wait(c, time.Hour, itsOwn); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait after %s: %v, want the context's deadline", what, err)
		}
	}
	// woken waits an hour's interval within 30 s: only a notification ends
	// it without error.
	woken := func(what string, wake func(string) bool) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := l.Wait(c, time.Hour, wake); err != nil {
			t.Fatalf("wait after %s: %v, want woken", what, err)
		}
	}

	apply(t, ctx, db.Pool, task.Start(task.Ref{ID: other}))
	quiet("another task started")
	apply(t, ctx, db.Pool, task.Start(task.Ref{ID: mine}))
	woken("its task started", itsOwn)
	apply(t, ctx, db.Pool, task.Touch(mine))
	quiet("a touch that kept the status")
	apply(t, ctx, db.Pool, task.Succeed(task.Ref{ID: other}, nil, ""))
	woken("another task succeeded, waking on any", nil)
	apply(t, ctx, db.Pool, task.Succeed(task.Ref{ID: mine}, nil, ""))
	woken("its task succeeded", itsOwn)
}

// TestListenerListensAgainAfterItsConnectionBroke: a Listener whose
// connection was cut (a Postgres restart, say) waits out its intervals,
// then connects and listens again.
func TestListenerListensAgainAfterItsConnectionBroke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	id := seed(t, db.Pool, "queued")
	l := task.Listen(ctx, db.Pool)
	defer l.Close()
	if !l.Listening() {
		t.Fatal("LISTEN failed")
	}
	var cut int
	if err := db.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = $1 AND query = 'LISTEN '||$2`, db.Name, task.StatusChannel).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("terminate the listening backend: %d cut, %v", cut, err)
	}
	// Each wait runs out its interval; one of the first sees the cut.
	deadline := time.Now().Add(30 * time.Second)
	for l.Listening() && time.Now().Before(deadline) {
		if err := l.Wait(ctx, 100*time.Millisecond, nil); err != nil {
			t.Fatal(err)
		}
	}
	if l.Listening() {
		t.Fatal("the cut connection was not noticed")
	}
	// After its backoff a wait connects again.
	for !l.Listening() && time.Now().Before(deadline) {
		if err := l.Wait(ctx, 200*time.Millisecond, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !l.Listening() {
		t.Fatal("the listener did not connect again")
	}
	apply(t, ctx, db.Pool, task.Start(task.Ref{ID: id}))
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := l.Wait(c, time.Hour, nil); err != nil {
		t.Fatalf("wait after the task started, listening again: %v, want woken", err)
	}
}
