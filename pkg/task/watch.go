package task

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Watcher tells the running steps of a worker process, as soon as it
// happens, that the work of their task stopped: the task was cancelled or
// failed, or an operator cancelled its parent (the migrations'
// task_stopped). One per process: it holds one connection of its own that
// LISTENs on StatusChannel, and reads the status of a watched task when a
// notification names it. After (re)connecting it reads every watched task
// once, so that a change made while it was not listening is not missed;
// while it cannot connect, the step runtime's lease heartbeat, which reads
// task_stopped too, is the fallback (within a third of the lease).
//
// A child whose own row Cancel of its parent skipped (pkg/task's cascade
// skips a row another transaction holds) sends no notification of its
// own: its steps learn it from the heartbeat.
type Watcher struct {
	pool *pgxpool.Pool
	log  zerolog.Logger

	mu      sync.Mutex
	watches map[uuid.UUID]map[*Watch]struct{}
}

// Watch is one watched run of a task: Done is closed once the task's work
// stopped, and Status then says how it ended.
type Watch struct {
	w      *Watcher
	id     uuid.UUID
	done   chan struct{}
	once   sync.Once
	status string
}

// NewWatcher returns a Watcher of the tasks in pool's database; Run it.
func NewWatcher(pool *pgxpool.Pool, log zerolog.Logger) *Watcher {
	return &Watcher{pool: pool, log: log, watches: map[uuid.UUID]map[*Watch]struct{}{}}
}

// Watch starts watching task id. Call it before the step reads or claims
// anything of the task, so that no change falls between; Close the watch
// when the run ends. A nil Watcher returns a watch that never fires.
func (w *Watcher) Watch(id uuid.UUID) *Watch {
	wt := &Watch{w: w, id: id, done: make(chan struct{})}
	if w == nil {
		return wt
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.watches[id]
	if set == nil {
		set = map[*Watch]struct{}{}
		w.watches[id] = set
	}
	set[wt] = struct{}{}
	return wt
}

// Done is closed once the task's work stopped.
func (wt *Watch) Done() <-chan struct{} { return wt.done }

// Status is the status that stopped the task's work (cancelled, failed);
// "" until Done is closed.
func (wt *Watch) Status() string {
	select {
	case <-wt.done:
		return wt.status
	default:
		return ""
	}
}

// Stop closes Done with status: the task's work stopped, as the watcher or
// another reader (the lease heartbeat) found. Only the first call counts.
func (wt *Watch) Stop(status string) {
	wt.once.Do(func() {
		wt.status = status
		close(wt.done)
	})
}

// Close ends the watch.
func (wt *Watch) Close() {
	if wt.w == nil {
		return
	}
	wt.w.mu.Lock()
	defer wt.w.mu.Unlock()
	if set := wt.w.watches[wt.id]; set != nil {
		delete(set, wt)
		if len(set) == 0 {
			delete(wt.w.watches, wt.id)
		}
	}
}

// watchedIDs are the tasks watched now.
func (w *Watcher) watchedIDs() []uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]uuid.UUID, 0, len(w.watches))
	for id := range w.watches {
		ids = append(ids, id)
	}
	return ids
}

// watched reports whether task id is watched now.
func (w *Watcher) watched(id uuid.UUID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches[id]) > 0
}

// stop fires the watches of task id with status.
func (w *Watcher) stop(id uuid.UUID, status string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.watches[id] {
		wt.Stop(status)
	}
}

// Reconnection pauses: after a broken or refused connection the watcher
// waits, doubling from watchRetryMin to watchRetryMax.
const (
	watchRetryMin = 500 * time.Millisecond
	watchRetryMax = 30 * time.Second
)

// Run listens until ctx ends, reconnecting after a failure; it returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	pause := watchRetryMin
	for ctx.Err() == nil {
		err := w.listen(ctx)
		if ctx.Err() != nil {
			break
		}
		w.log.Warn().Err(err).Dur("retry_in", pause).Msg("task status watcher: not listening; the lease heartbeat stands in")
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		pause = min(2*pause, watchRetryMax)
	}
	return nil
}

// listen connects, LISTENs, reads every watched task once, then serves
// notifications until the connection breaks or ctx ends.
func (w *Watcher) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+StatusChannel); err != nil {
		return err
	}
	if err := w.check(ctx, w.watchedIDs()); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		id, err := uuid.Parse(n.Payload)
		if err != nil || !w.watched(id) {
			continue
		}
		if err := w.check(ctx, []uuid.UUID{id}); err != nil && ctx.Err() == nil {
			w.log.Warn().Err(err).Str("task_id", id.String()).Msg("task status watcher: read the task")
		}
	}
}

// check reads whether the work of the tasks ids stopped and fires their
// watches if so.
func (w *Watcher) check(ctx context.Context, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := w.pool.Query(ctx, `SELECT id, task_stopped(id) FROM unnest($1::uuid[]) AS id`, ids)
	if err != nil {
		return err
	}
	var id uuid.UUID
	var status *string
	_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		if status != nil {
			w.stop(id, *status)
		}
		return nil
	})
	return err
}
