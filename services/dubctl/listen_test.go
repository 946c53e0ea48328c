package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWaitWakesOnItsTasksStatus: a wait LISTENing on the status channel
// returns when its own task's status changes, long before its interval,
// and not when another task's does.
func TestWaitWakesOnItsTasksStatus(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	mine, other := insertTask(t, e, "running", "", "{}"), insertTask(t, e, "running", "", "{}")
	w := listenStatus(ctx, e.db.Pool, mine)
	defer w.close()
	if w.conn == nil {
		t.Fatal("LISTEN failed: the wait would only poll")
	}
	setStatus := func(id any, status string) {
		t.Helper()
		if _, err := e.db.Pool.Exec(ctx, `UPDATE tasks SET status = $2 WHERE id = $1`, id, status); err != nil {
			t.Fatal(err)
		}
	}

	// Another task ending does not wake it: the wait runs into its
	// context's end (an hour's interval would otherwise keep it).
	setStatus(other, "done")
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := w.wait(short, time.Hour)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait after another task's change: %v, want the context's deadline", err)
	}

	// Its own task ending does, well within the 30 s given (the
	// interval is an hour).
	setStatus(mine, "done")
	long, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.wait(long, time.Hour); err != nil {
		t.Fatalf("wait after its task's change: %v, want woken", err)
	}

	// A change that does not move the status (updated_at, say) announces
	// nothing.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE tasks SET updated_at = now() WHERE id = $1`, mine); err != nil {
		t.Fatal(err)
	}
	short, cancel = context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.wait(short, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait after an update that kept the status: %v, want the context's deadline", err)
	}
}
