package task

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener wakes a wait as soon as a task's status changes: it holds a
// connection of its own (not one of the pool's) that LISTENs on
// StatusChannel. While it has none — the LISTEN failed, the connection
// broke — a wait runs out its interval, and the next wait after that
// interval connects again: whoever waits on it reads what it watches on
// every interval anyway, so a change missed meanwhile is read late, not
// lost.
type Listener struct {
	cfg     *pgx.ConnConfig
	conn    *pgx.Conn // nil: not listening now
	retryAt time.Time // when to connect again
}

// Listen starts listening on StatusChannel on a connection to pool's
// database; call it before the first read of what it watches, so that no
// change falls between the two. Close it when done.
func Listen(ctx context.Context, pool *pgxpool.Pool) *Listener {
	l := &Listener{cfg: pool.Config().ConnConfig.Copy()}
	l.connect(ctx, 0)
	return l
}

// connect opens the listening connection; on failure it tries again after
// backoff.
func (l *Listener) connect(ctx context.Context, backoff time.Duration) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err == nil {
		if _, err = conn.Exec(ctx, "LISTEN "+StatusChannel); err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}
	if err != nil {
		l.retryAt = time.Now().Add(backoff)
		return
	}
	l.conn = conn
}

// Listening reports whether changes wake Wait now.
func (l *Listener) Listening() bool { return l.conn != nil }

// Wait returns after d, or earlier when the status of a task changes for
// which wake (given the task id as text; nil: any task) is true. It fails
// only when ctx is done.
func (l *Listener) Wait(ctx context.Context, d time.Duration, wake func(id string) bool) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if l.conn == nil && !time.Now().Before(l.retryAt) {
		l.connect(wctx, max(d, time.Second))
	}
	for l.conn != nil {
		n, err := l.conn.WaitForNotification(wctx)
		if err != nil {
			if wctx.Err() == nil { // the connection broke
				l.Close()
				l.retryAt = time.Now().Add(max(d, time.Second))
			}
			break
		}
		if wake == nil || wake(n.Payload) {
			return nil
		}
	}
	<-wctx.Done()
	return ctx.Err()
}

// Close closes the listening connection.
func (l *Listener) Close() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
	l.conn = nil
}
