package main

import (
	"context"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statusWaiter wakes a wait as soon as the task's status changes: it holds
// a connection that LISTENs on task.StatusChannel. When the LISTEN or the
// connection fails it falls back to waiting out the poll interval, so a
// wait never depends on it.
type statusWaiter struct {
	conn *pgxpool.Conn // nil: poll only
	id   string
}

// listenStatus starts listening for id's status changes; call it before
// the first read of the task, so that no change falls between the two.
func listenStatus(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) *statusWaiter {
	w := &statusWaiter{id: id.String()}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return w
	}
	if _, err := conn.Exec(ctx, "LISTEN "+task.StatusChannel); err != nil {
		conn.Release()
		return w
	}
	w.conn = conn
	return w
}

// wait returns after d, or earlier when the task's status changed; it
// fails only when ctx is done.
func (w *statusWaiter) wait(ctx context.Context, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for w.conn != nil {
		n, err := w.conn.Conn().WaitForNotification(wctx)
		if err != nil {
			if wctx.Err() == nil { // the connection broke: poll from now on
				w.close()
			}
			break
		}
		if n.Payload == w.id {
			return nil
		}
	}
	<-wctx.Done()
	return ctx.Err()
}

// close gives up the listening connection. It is closed rather than
// returned to the pool: it still listens, and a wait cut short by its
// timeout may have left a cancel request in flight for it.
func (w *statusWaiter) close() {
	if w.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = w.conn.Conn().Close(ctx)
	w.conn.Release()
	w.conn = nil
}
