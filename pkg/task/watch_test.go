package task_test

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/rs/zerolog"
)

// fired waits for wt to fire and checks the status it names.
func fired(t *testing.T, wt *task.Watch, what, want string) {
	t.Helper()
	select {
	case <-wt.Done():
		if got := wt.Status(); got != want {
			t.Errorf("%s: watch fired with %q, want %q", what, got, want)
		}
	case <-time.After(testenv.Within(t, 10*time.Second)):
		t.Fatalf("%s: the watch did not fire", what)
	}
}

// TestWatcherFiresWhenTheTaskStops: a watch fires when its task is
// cancelled or fails — and, through the cascade, when an operator cancels
// its parent — but not for another task's change nor for a change that
// does not stop the work (queued to running); a watch of a task that
// stopped before the watcher connected fires once it has.
func TestWatcherFiresWhenTheTaskStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	early := seed(t, db.Pool, "queued")
	apply(t, ctx, db.Pool, task.Cancel(task.Ref{ID: early}, "before the watcher listened"))
	w := task.NewWatcher(db.Pool, zerolog.Nop())
	before := w.Watch(early)
	defer before.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(runCtx) }()
	defer func() { stop(); <-done }()
	fired(t, before, "a task cancelled before the watcher listened", task.Cancelled)

	cancelled, failed, other := seed(t, db.Pool, "queued"), seed(t, db.Pool, "queued"), seed(t, db.Pool, "queued")
	wc, wf := w.Watch(cancelled), w.Watch(failed)
	defer wc.Close()
	defer wf.Close()
	apply(t, ctx, db.Pool, task.Start(task.Ref{ID: cancelled}), task.Cancel(task.Ref{ID: other}, "not watched"))
	apply(t, ctx, db.Pool, task.Cancel(task.Ref{ID: cancelled}, "by an operator"))
	fired(t, wc, "a cancelled task", task.Cancelled)
	if wf.Status() != "" {
		t.Fatalf("a watch fired with %q for another task's change", wf.Status())
	}
	apply(t, ctx, db.Pool, task.Fail(task.Ref{ID: failed}, "", "asr: boom"))
	fired(t, wf, "a failed task", task.Failed)

	parent, children := family(t, db.Pool, "es", "fr")
	start(t, ctx, db.Pool, children)
	wk := w.Watch(children[0])
	defer wk.Close()
	apply(t, ctx, db.Pool, task.Cancel(task.Ref{ID: parent}, "by an operator"))
	fired(t, wk, "a child of a cancelled parent", task.Cancelled)
}

// TestAWatchOfANilWatcherFiresOnlyWhenStopped: without a watcher (a
// process that has none) a watch fires only through Stop, as the lease
// heartbeat calls it.
func TestAWatchOfANilWatcherFiresOnlyWhenStopped(t *testing.T) {
	t.Parallel()
	var w *task.Watcher
	wt := w.Watch([16]byte{1})
	defer wt.Close()
	if wt.Status() != "" {
		t.Fatal("fired unstopped")
	}
	wt.Stop(task.Failed)
	wt.Stop(task.Cancelled)
	fired(t, wt, "a stopped watch", task.Failed)
}
