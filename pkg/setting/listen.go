package setting

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener LISTENs on Channel on a connection of its own (not one of the
// pool's). While it has none, a wait is a plain sleep: the watch reads on
// every poll anyway.
type listener struct {
	cfg  *pgx.ConnConfig
	conn *pgx.Conn // nil: not listening now
}

// listening reports whether announced changes end a wait now.
func (l *listener) listening() bool { return l.conn != nil }

// connect opens the listening connection.
func (l *listener) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, l.cfg)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", Channel, err)
	}
	if _, err := conn.Exec(cctx, "LISTEN "+Channel); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("listen on %s: %w", Channel, err)
	}
	l.conn = conn
	return nil
}

// wait returns after d, or earlier when a change is announced or ctx ends.
// A broken connection is closed (the next connect opens another) and the
// rest of d is slept.
func (l *listener) wait(ctx context.Context, d time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if l.conn != nil {
		_, err := l.conn.WaitForNotification(wctx)
		if err == nil {
			return
		}
		if wctx.Err() == nil {
			l.close() // the connection broke
		}
	}
	<-wctx.Done()
}

// close closes the listening connection.
func (l *listener) close() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
	l.conn = nil
}
